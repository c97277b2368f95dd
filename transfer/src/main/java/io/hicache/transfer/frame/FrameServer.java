package io.hicache.transfer.frame;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * A listener for one framed protocol: every accepted connection gets a fresh handler, and the accepted connections
 * are kept so that they can be closed together. The control plane and the TCP transport each have one.
 *
 * <p>Thread-safe. Whoever {@link #bind bound} it owns it and closes it, which closes every accepted connection; the
 * event loop group stays the owner's to shut down.
 */
public final class FrameServer implements AutoCloseable {
    private final Channel server;
    private final ChannelGroup accepted;

    private FrameServer(Channel server, ChannelGroup accepted) {
        this.server = server;
        this.accepted = accepted;
    }

    /**
     * Binds to {@code bindHost:port} (0 picks a free port) on {@code group}; each accepted connection is served by
     * a new handler from {@code handlers}. {@code socketBufferBytes} sizes accepted sockets' send and receive
     * buffers; 0 leaves the system's. {@code acceptedName} names the group of accepted connections.
     *
     * @param failure how the exception's message starts, before the cause (say, what cannot listen where)
     * @throws HiCacheException ({@link ErrorCode#TRANSFER_UNAVAILABLE}) when it cannot bind within 10 s
     */
    public static FrameServer bind(
            EventLoopGroup group,
            String bindHost,
            int port,
            int socketBufferBytes,
            String acceptedName,
            String failure,
            Supplier<? extends FrameHandler> handlers) {
        ChannelGroup accepted = new DefaultChannelGroup(acceptedName, GlobalEventExecutor.INSTANCE);
        ServerBootstrap b = new ServerBootstrap()
                .group(group)
                .channel(NettyLoops.serverChannel())
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        FrameHandler handler = handlers.get();
                        handler.install(ch);
                        accepted.add(ch);
                        ch.pipeline().addLast(handler);
                    }
                });
        if (socketBufferBytes > 0) {
            b.childOption(ChannelOption.SO_RCVBUF, socketBufferBytes)
                    .childOption(ChannelOption.SO_SNDBUF, socketBufferBytes);
        }
        ChannelFuture bound = b.bind(bindHost, port);
        if (!bound.awaitUninterruptibly(10, TimeUnit.SECONDS) || !bound.isSuccess()) {
            bound.channel().close();
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    failure + ": "
                            + (bound.cause() == null
                                    ? "bind did not finish within 10 s"
                                    : bound.cause().getMessage()));
        }
        return new FrameServer(bound.channel(), accepted);
    }

    /** The bound port. */
    public int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** Closes every accepted connection, waiting at most {@code millis} for them to close; true if all did. */
    public boolean closeAccepted(long millis) {
        return accepted.close().awaitUninterruptibly(millis, TimeUnit.MILLISECONDS);
    }

    /** Stops listening and closes every accepted connection, waiting up to 5 s for each. Idempotent. */
    @Override
    public void close() {
        server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        closeAccepted(5_000);
    }
}
