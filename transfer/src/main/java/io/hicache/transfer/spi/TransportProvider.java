package io.hicache.transfer.spi;

/**
 * Creates a {@link Transport}; found with {@link java.util.ServiceLoader}. Implementations are stateless, with a
 * public no-argument constructor.
 */
public interface TransportProvider {
    /** The transport's name. */
    String name();

    /** Creates the transport for one engine. */
    Transport create(TransportContext context);
}
