package io.hicache.transfer.tcp;

import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportProvider;

/**
 * Finds the TCP transport ({@code tcp}) through {@link java.util.ServiceLoader}. Public for the service loader only;
 * stateless.
 */
public final class TcpTransportProvider implements TransportProvider {
    @Override
    public String name() {
        return TcpTransport.NAME;
    }

    @Override
    public Transport create(TransportContext context) {
        return new TcpTransport(context);
    }
}
