package io.hicache.transfer.frame;

import io.hicache.core.util.Checks;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * The connecting side of one framed connection: opens it, says {@link Frames#HELLO hello}, and keeps its channel and
 * the reason it closed. What is asked and answered on it is the subclass's; this holds what the control connection
 * and the TCP data connection would otherwise both write.
 *
 * <p>Thread-safe: {@link #isOpen}, {@link #closeReason} and {@link #close} may be called from any thread; channel
 * events run on the channel's event loop. Whoever {@link #connect connected} it owns it and closes it.
 */
public abstract class FrameClient extends FrameHandler {
    /** The close reason when the peer closed first, and nothing else was recorded. */
    protected static final String PEER_CLOSED = "the peer closed the connection";

    private final String label;
    /** Set once connected; null before. */
    private volatile @Nullable Channel channel;

    private volatile @Nullable String closeReason;

    /** A client of the protocol whose headers carry {@code magic}; {@code label} names it in reasons and logs. */
    protected FrameClient(int magic, String label) {
        super(magic);
        this.label = label;
    }

    /**
     * Starts connecting {@code client} to {@code host:port} on {@code group}; the future completes with it once it
     * sent its hello as {@code selfName}, or fails with the connect's cause. {@code socketBufferBytes} sizes the
     * socket's send and receive buffers; 0 leaves the system's (small control traffic needs no more).
     */
    protected static <C extends FrameClient> CompletableFuture<C> connect(
            C client,
            EventLoopGroup group,
            String host,
            int port,
            long connectTimeoutMillis,
            int socketBufferBytes,
            String selfName) {
        CompletableFuture<C> result = new CompletableFuture<>();
        Bootstrap b = new Bootstrap()
                .group(group)
                .channel(NettyLoops.socketChannel())
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(Integer.MAX_VALUE, connectTimeoutMillis))
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        client.install(ch);
                        ch.pipeline().addLast(client);
                    }
                });
        if (socketBufferBytes > 0) {
            b.option(ChannelOption.SO_RCVBUF, socketBufferBytes).option(ChannelOption.SO_SNDBUF, socketBufferBytes);
        }
        ChannelFuture f = b.connect(host, port);
        f.addListener(done -> {
            if (!done.isSuccess()) {
                result.completeExceptionally(done.cause());
                return;
            }
            Channel ch = f.channel();
            // through the base type: a field is not reached through a type variable
            ((FrameClient) client).channel = ch;
            byte[] hello = selfName.getBytes(StandardCharsets.UTF_8);
            // written before the future completes, so the hello is the first frame the peer reads
            ch.writeAndFlush(Unpooled.wrappedBuffer(
                    client.header(ch.alloc(), Frames.HELLO, 0, 0, 0, hello.length), Unpooled.wrappedBuffer(hello)));
            result.complete(client);
        });
        return result;
    }

    /** The connected channel; set before {@link #connect}'s future completes, so callers of the subclass see it. */
    protected final Channel channel() {
        return Checks.checkNotNull(channel, "the channel of a connected client");
    }

    /** What names this connection in reasons and logs. */
    protected final String label() {
        return label;
    }

    /** Whether the connection is open. */
    public final boolean isOpen() {
        Channel c = channel;
        return c != null && c.isActive() && closeReason == null;
    }

    /** Why it closed, or null. */
    public final @Nullable String closeReason() {
        return closeReason;
    }

    /** Why it closed, or {@code fallback} while no reason is recorded. */
    protected final String closeReasonOr(String fallback) {
        String r = closeReason;
        return r == null ? fallback : r;
    }

    /**
     * Closes the connection, recording {@code reason} unless one is recorded already; {@link #closed} follows on the
     * event loop once the channel is down. Idempotent.
     */
    public void close(String reason) {
        if (closeReason == null) {
            closeReason = reason;
        }
        closing();
        Channel c = channel;
        if (c != null) {
            c.close();
        }
    }

    /** Runs in {@link #close}, after the reason is recorded and before the channel closes; does nothing here. */
    protected void closing() {}

    /**
     * The channel is down, by {@link #close} or by the peer; runs once, on the event loop, with the reason recorded
     * (the peer closing when nothing else was). Whatever is still outstanding must be settled here.
     */
    protected abstract void closed(String reason);

    @Override
    public final void channelInactive(ChannelHandlerContext ctx) {
        if (closeReason == null) {
            closeReason = PEER_CLOSED;
        }
        closed(closeReason);
        ctx.fireChannelInactive();
    }

    @Override
    public final void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        close(String.valueOf(cause.getMessage() == null ? cause : cause.getMessage()));
    }

    @Override
    public String toString() {
        return label;
    }
}
