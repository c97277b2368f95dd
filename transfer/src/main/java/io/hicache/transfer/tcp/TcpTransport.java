package io.hicache.transfer.tcp;

import io.hicache.transfer.SegmentDescriptor;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import io.hicache.transfer.spi.TransportProvider;
import io.netty.channel.EventLoopGroup;
import java.util.concurrent.TimeUnit;

/**
 * The TCP transport on Netty (epoll where available): several connections per peer, slices spread over them,
 * payloads sent from and received into registered memory without a user-space copy. Reaches any peer whose
 * listener it can connect to. Thread-safe; the engine closes it, which shuts down its event loops.
 */
public final class TcpTransport implements Transport {
    public static final String NAME = "tcp";

    private final TransportContext context;
    private final EventLoopGroup group;

    TcpTransport(TransportContext context) {
        this.context = context;
        this.group = NettyLoops.group("transfer-tcp-" + context.config().name(), context.config().ioThreads());
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public boolean canReach(SegmentDescriptor local, SegmentDescriptor remote) {
        return remote.transports().contains(NAME);
    }

    @Override
    public TransportLink link(PeerContext peer) {
        return new TcpLink(context.config(), peer, group, context.timer());
    }

    @Override
    public void close() {
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }

    /** Finds the TCP transport through {@link java.util.ServiceLoader}. */
    public static final class Provider implements TransportProvider {
        @Override
        public String name() {
            return NAME;
        }

        @Override
        public Transport create(TransportContext context) {
            return new TcpTransport(context);
        }
    }
}
