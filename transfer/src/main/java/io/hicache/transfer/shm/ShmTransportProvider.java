package io.hicache.transfer.shm;

import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportProvider;

/**
 * Finds the shared-memory transport ({@code shm}) through {@link java.util.ServiceLoader}. Public for the service
 * loader only; stateless.
 */
public final class ShmTransportProvider implements TransportProvider {
    @Override
    public String name() {
        return ShmTransport.NAME;
    }

    @Override
    public Transport create(TransportContext context) {
        return new ShmTransport(context);
    }
}
