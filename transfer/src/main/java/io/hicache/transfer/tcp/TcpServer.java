package io.hicache.transfer.tcp;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.transfer.frame.NettyLoops;
import io.hicache.transfer.spi.LocalSegment;
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

/**
 * The TCP transport's listener: peers' data connections arrive here to read and write the engine's regions. Its
 * address is the transport's published endpoint. Thread-safe. The transport closes it, which closes every accepted
 * connection.
 */
final class TcpServer implements AutoCloseable {
    private final Channel server;
    private final ChannelGroup accepted = new DefaultChannelGroup("transfer-tcp-accepted", GlobalEventExecutor.INSTANCE);

    /**
     * Binds to {@code bindHost} on a free port, on {@code group}, serving {@code segment}.
     *
     * @throws HiCacheException ({@link ErrorCode#TRANSFER_UNAVAILABLE}) when it cannot bind within 10 s
     */
    TcpServer(EventLoopGroup group, String bindHost, LocalSegment segment) {
        ServerBootstrap b = new ServerBootstrap().group(group).channel(NettyLoops.serverChannel())
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childOption(ChannelOption.SO_RCVBUF, 4 << 20)
                .childOption(ChannelOption.SO_SNDBUF, 4 << 20)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ServerHandler handler = new ServerHandler(segment);
                        handler.install(ch);
                        accepted.add(ch);
                        ch.pipeline().addLast(handler);
                    }
                });
        ChannelFuture bound = b.bind(bindHost, 0);
        if (!bound.awaitUninterruptibly(10, TimeUnit.SECONDS) || !bound.isSuccess()) {
            bound.channel().close();
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "tcp transport cannot listen on " + bindHost
                    + ": " + (bound.cause() == null ? "bind did not finish within 10 s" : bound.cause().getMessage()));
        }
        this.server = bound.channel();
    }

    /** The bound port. */
    int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** Closes every accepted connection, waiting at most {@code millis} for them to close; true if all did. */
    boolean closeAccepted(long millis) {
        return accepted.close().awaitUninterruptibly(millis, TimeUnit.MILLISECONDS);
    }

    @Override
    public void close() {
        server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        closeAccepted(5_000);
    }
}
