package io.hicache.transfer.tcp;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
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
 * The engine's listener: peers connect here to describe the segment, read and write its regions, and send it
 * messages. Thread-safe. The engine closes it, which closes every accepted connection.
 */
public final class TcpListener implements AutoCloseable {
    private final Channel server;
    private final ChannelGroup accepted = new DefaultChannelGroup("transfer-accepted", GlobalEventExecutor.INSTANCE);

    /** Binds to {@code host:port} (0 picks a port) on {@code group}, serving {@code host}. */
    public TcpListener(EventLoopGroup group, String bindHost, int port, SegmentHost segment) {
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
        io.netty.channel.ChannelFuture bound = b.bind(bindHost, port);
        if (!bound.awaitUninterruptibly(10, TimeUnit.SECONDS) || !bound.isSuccess()) {
            bound.channel().close();
            throw io.hicache.transfer.TransferException.unavailable("cannot listen on " + bindHost + ":" + port + ": "
                    + (bound.cause() == null ? "bind did not finish within 10 s" : bound.cause().getMessage()));
        }
        this.server = bound.channel();
    }

    /** The bound port. */
    public int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** Closes every accepted connection, waiting at most {@code millis} for them to close; true if all did. */
    public boolean closeAccepted(long millis) {
        return accepted.close().awaitUninterruptibly(millis, TimeUnit.MILLISECONDS);
    }

    @Override
    public void close() {
        server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        closeAccepted(5_000);
    }
}
