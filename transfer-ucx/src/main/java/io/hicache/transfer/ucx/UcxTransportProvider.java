package io.hicache.transfer.ucx;

import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportProvider;
import java.util.Optional;

/**
 * Finds the UCX transport ({@code ucx}) through {@link java.util.ServiceLoader}. Public for the service loader only;
 * stateless. Unavailable, with the reason, where UCX's library ({@code libucp.so.0}) does not load.
 */
public final class UcxTransportProvider implements TransportProvider {
    @Override
    public String name() {
        return UcxTransport.NAME;
    }

    @Override
    public Optional<String> unavailableReason() {
        return UcxNative.unavailable();
    }

    @Override
    public Transport create(TransportContext context) {
        return new UcxTransport(context);
    }
}
