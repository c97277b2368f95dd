package io.hicache.transfer.control;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.transfer.frame.FrameServer;
import io.hicache.transfer.frame.NettyLoops;
import io.netty.channel.EventLoopGroup;
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
    private final FrameServer server;

    private ControlPlane(String engineName, EventLoopGroup loop, FrameServer server) {
        this.engineName = engineName;
        this.loop = loop;
        this.server = server;
    }

    /**
     * Binds the listener to {@code bindHost:port} (0 picks a port), serving {@code host}.
     *
     * @throws HiCacheException ({@link ErrorCode#TRANSFER_UNAVAILABLE}) when it cannot bind within 10 s
     */
    public static ControlPlane start(String engineName, String bindHost, int port, ControlHost host) {
        // one thread: control frames are small and the host's callbacks return at once
        EventLoopGroup loop = NettyLoops.group("transfer-control-" + engineName, 1);
        FrameServer server;
        try {
            // the system's socket buffers: control traffic is small
            server = FrameServer.bind(
                    loop,
                    bindHost,
                    port,
                    0,
                    "transfer-control-accepted",
                    "cannot listen on " + bindHost + ":" + port,
                    () -> new ControlServerHandler(host));
        } catch (RuntimeException e) {
            shutdown(loop);
            throw e;
        }
        return new ControlPlane(engineName, loop, server);
    }

    /** The listener's port. */
    public int port() {
        return server.port();
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
        server.close();
        shutdown(loop);
    }

    private static void shutdown(EventLoopGroup loop) {
        loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
