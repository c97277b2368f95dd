package io.hicache.transfer.spi;

/**
 * Creates a {@link Transport}; found with {@link java.util.ServiceLoader}, so a transport in its own jar is listed in
 * that jar's {@code META-INF/services/io.hicache.transfer.spi.TransportProvider}. Implementations are public and
 * stateless, with a public no-argument constructor.
 */
public interface TransportProvider {
    /** The transport's name, as configurations list it. */
    String name();

    /**
     * Creates the transport for one engine.
     *
     * @throws io.hicache.core.HiCacheException when it cannot start (a port it cannot bind, a device it cannot open)
     */
    Transport create(TransportContext context);
}
