package io.hicache.transfer.frame;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;

/**
 * Event loop groups with named daemon threads, on epoll where the native library loads and on NIO elsewhere.
 * Stateless.
 *
 * <p>The one place in the module that does not make threads with {@link io.hicache.core.util.Threads}: Netty's
 * {@link DefaultThreadFactory} makes {@code FastThreadLocalThread}s, which Netty's buffer allocators and thread
 * locals need for their fast per-thread caches on event loops.
 */
public final class NettyLoops {
    private NettyLoops() {}

    /** Whether epoll is used. */
    public static boolean epoll() {
        return Epoll.isAvailable();
    }

    /** A group of {@code threads} daemon threads named {@code name-N}. The caller shuts it down. */
    public static EventLoopGroup group(String name, int threads) {
        IoHandlerFactory factory = epoll() ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(name, true), factory);
    }

    /** The client channel class that matches {@link #group}'s I/O handler. */
    public static Class<? extends SocketChannel> socketChannel() {
        return epoll() ? EpollSocketChannel.class : NioSocketChannel.class;
    }

    /** The server channel class that matches {@link #group}'s I/O handler. */
    public static Class<? extends ServerChannel> serverChannel() {
        return epoll() ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
    }
}
