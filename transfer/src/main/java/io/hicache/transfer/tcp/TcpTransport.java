package io.hicache.transfer.tcp;

import io.hicache.transfer.frame.FrameServer;
import io.hicache.transfer.frame.NettyLoops;
import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.SegmentDescriptor;
import io.hicache.transfer.spi.Transport;
import io.hicache.transfer.spi.TransportContext;
import io.hicache.transfer.spi.TransportLink;
import io.netty.channel.EventLoopGroup;
import java.util.concurrent.TimeUnit;

/**
 * The TCP transport on Netty (epoll where available): its own listener, whose {@code host:port} it publishes as its
 * endpoint, serves peers' reads and writes of this engine's regions; links open several connections to a peer's
 * listener and spread slices over them. Payloads are sent from and received into registered memory without a
 * user-space copy. Reaches any peer that publishes a TCP endpoint.
 *
 * <p>Thread-safe. Outbound links and inbound connections run on separate event loop groups of {@code ioThreads}
 * threads each, as a peer both pulls from and serves the same process. The engine closes it, which closes its
 * listener and shuts down both groups.
 */
final class TcpTransport implements Transport {
    static final String NAME = "tcp";
    /** Send and receive buffers of data sockets, both ends: large, so page payloads stream without window stalls. */
    static final int SOCKET_BUFFER_BYTES = 4 << 20;

    private final TransportContext context;
    private final EventLoopGroup outbound;
    private final EventLoopGroup inbound;
    private final FrameServer server;

    TcpTransport(TransportContext context) {
        this.context = context;
        this.outbound = NettyLoops.group("transfer-tcp-" + context.engineName(), context.ioThreads());
        this.inbound = NettyLoops.group("transfer-tcp-in-" + context.engineName(), context.ioThreads());
        try {
            this.server = FrameServer.bind(
                    inbound,
                    context.bindHost(),
                    0,
                    SOCKET_BUFFER_BYTES,
                    "transfer-tcp-accepted",
                    "tcp transport cannot listen on " + context.bindHost(),
                    () -> new ServerHandler(context.local()));
        } catch (RuntimeException e) {
            shutdownGroups();
            throw e;
        }
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String endpoint() {
        return context.bindHost() + ":" + server.port();
    }

    @Override
    public boolean canReach(SegmentDescriptor local, SegmentDescriptor remote) {
        return remote.endpoint(NAME).isPresent();
    }

    @Override
    public TransportLink link(PeerContext peer) {
        return new TcpLink(context, peer, outbound);
    }

    @Override
    public void closeInbound(long waitMillis) {
        server.closeAccepted(waitMillis);
    }

    @Override
    public void close() {
        server.close();
        shutdownGroups();
    }

    private void shutdownGroups() {
        outbound.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
        inbound.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
