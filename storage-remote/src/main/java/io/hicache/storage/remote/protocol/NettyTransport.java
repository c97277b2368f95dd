package io.hicache.storage.remote.protocol;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.util.Locale;

/**
 * Which of Netty's socket transports the daemon ({@code server.transport}) and the {@code remote} client
 * ({@code remote.transport}) run on: Linux's epoll through Netty's native library where it loads, Java's NIO
 * elsewhere. {@link #AUTO} is resolved once, at start, with {@link #resolve()}; the start line says what was chosen.
 * Immutable.
 */
public enum NettyTransport {
    /** Epoll where Netty's native library loads on this machine, NIO otherwise. */
    AUTO,
    /** Java's NIO selector: every platform. */
    NIO,
    /** Netty's native epoll transport: Linux on x86-64 only; asking for it elsewhere fails at start. */
    EPOLL;

    /** The name in settings and start lines: {@code auto}, {@code nio}, {@code epoll}. */
    public String configName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The transport to run on: this one, or for {@link #AUTO} epoll if it loads here and NIO if not.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} for {@link #EPOLL} where it does not load, naming why
     */
    public NettyTransport resolve() {
        return switch (this) {
            case AUTO -> Epoll.isAvailable() ? EPOLL : NIO;
            case NIO -> NIO;
            case EPOLL -> {
                if (!Epoll.isAvailable()) {
                    throw new HiCacheException(
                            ErrorCode.CONFIG_INVALID,
                            "the epoll transport was asked for but does " + "not load here: "
                                    + Epoll.unavailabilityCause() + "; use nio or auto");
                }
                yield EPOLL;
            }
        };
    }

    /**
     * What a start line says: the resolved transport, and for NIO chosen by {@link #AUTO} why epoll was not used.
     *
     * @param asked what the setting asked for
     */
    public String describe(NettyTransport asked) {
        if (this == NIO && asked == AUTO) {
            Throwable why = Epoll.unavailabilityCause();
            return "nio (epoll does not load here" + (why == null ? "" : ": " + why.getMessage()) + ")";
        }
        return configName();
    }

    /** The I/O handler of event loops for this resolved transport. */
    public IoHandlerFactory ioHandlerFactory() {
        return resolved() == EPOLL ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
    }

    /** The client socket channel class matching {@link #ioHandlerFactory()}. */
    public Class<? extends SocketChannel> socketChannel() {
        return resolved() == EPOLL ? EpollSocketChannel.class : NioSocketChannel.class;
    }

    /** The server socket channel class matching {@link #ioHandlerFactory()}. */
    public Class<? extends ServerChannel> serverChannel() {
        return resolved() == EPOLL ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
    }

    private NettyTransport resolved() {
        if (this == AUTO) {
            throw new IllegalStateException("resolve() the auto transport first");
        }
        return this;
    }
}
