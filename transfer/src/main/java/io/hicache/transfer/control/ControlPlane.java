package io.hicache.transfer.control;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.transfer.frame.NettyLoops;
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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * An engine's control plane: the listener peers open its segment at (they describe it, ping it and send it
 * messages), and the control connections it opens to peers, on one event loop thread of their own. Control traffic
 * is small; page bytes never travel here but over a transport.
 *
 * <p>Thread-safe. The engine starts it and closes it; closing closes every control connection, both ways.
 */
public final class ControlPlane implements AutoCloseable {
    private final String engineName;
    private final EventLoopGroup loop;
    private final Channel server;
    private final ChannelGroup accepted;

    private ControlPlane(String engineName, EventLoopGroup loop, Channel server, ChannelGroup accepted) {
        this.engineName = engineName;
        this.loop = loop;
        this.server = server;
        this.accepted = accepted;
    }

    /**
     * Binds the listener to {@code bindHost:port} (0 picks a port), serving {@code host}.
     *
     * @throws HiCacheException ({@link ErrorCode#TRANSFER_UNAVAILABLE}) when it cannot bind within 10 s
     */
    public static ControlPlane start(String engineName, String bindHost, int port, ControlHost host) {
        // one thread: control frames are small and the host's callbacks return at once
        EventLoopGroup loop = NettyLoops.group("transfer-control-" + engineName, 1);
        ChannelGroup accepted = new DefaultChannelGroup("transfer-control-accepted", GlobalEventExecutor.INSTANCE);
        ServerBootstrap b = new ServerBootstrap().group(loop).channel(NettyLoops.serverChannel())
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ControlServerHandler handler = new ControlServerHandler(host);
                        handler.install(ch);
                        accepted.add(ch);
                        ch.pipeline().addLast(handler);
                    }
                });
        ChannelFuture bound = b.bind(bindHost, port);
        if (!bound.awaitUninterruptibly(10, TimeUnit.SECONDS) || !bound.isSuccess()) {
            bound.channel().close();
            shutdown(loop);
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "cannot listen on " + bindHost + ":" + port
                    + ": " + (bound.cause() == null ? "bind did not finish within 10 s" : bound.cause().getMessage()));
        }
        return new ControlPlane(engineName, loop, bound.channel(), accepted);
    }

    /** The listener's port. */
    public int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /**
     * Starts opening a control connection to the listener at {@code host:port}; the future completes with it once it
     * said hello, or fails. {@code label} names it in reasons and logs.
     */
    public CompletableFuture<ControlClient> connect(String host, int port, long connectTimeoutMillis, String label) {
        return ControlClient.connect(loop, host, port, connectTimeoutMillis, engineName, label);
    }

    /** Stops listening, closes every control connection and stops the thread. Idempotent. */
    @Override
    public void close() {
        server.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        accepted.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        shutdown(loop);
    }

    private static void shutdown(EventLoopGroup loop) {
        loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
