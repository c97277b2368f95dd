package io.hicache.transfer.spi;

import java.util.Optional;

/**
 * Creates a {@link Transport}; found with {@link java.util.ServiceLoader}, so a transport in its own jar is listed in
 * that jar's {@code META-INF/services/io.hicache.transfer.spi.TransportProvider}. Implementations are public and
 * stateless, with a public no-argument constructor.
 */
public interface TransportProvider {
    /** The transport's name, as configurations list it. */
    String name();

    /**
     * Why the transport cannot run in this process (no driver, no device), or empty when {@link #create} may succeed:
     * configurations that pick transports for the user ({@code disaggregation-transfer-backend=auto}) leave out those
     * that cannot run instead of failing. Cheap enough to call once per configuration read.
     */
    default Optional<String> unavailableReason() {
        return Optional.empty();
    }

    /**
     * Creates the transport for one engine.
     *
     * @throws io.hicache.core.HiCacheException when it cannot start (a port it cannot bind, a device it cannot open)
     */
    Transport create(TransportContext context);
}
