package io.hicache.transfer.frame;

import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * The listener's side of one framed connection: learns the peer's name from its {@link Frames#HELLO hello} and
 * reports it connected (and disconnected when the channel goes down), flushes answers once per read burst, and closes
 * the connection on a frame type the protocol does not have or on a failure. What the requests mean is the
 * subclass's.
 *
 * <p>Runs on its channel's event loop only; one instance belongs to one accepted channel, which its listener owns.
 */
public abstract class FrameServerHandler extends FrameHandler {
    /** Named after the subclass, so log levels set for a protocol's handler still apply. */
    private final System.Logger log = System.getLogger(getClass().getName());

    private final String kind;
    private String peer = "?";
    private boolean counted;
    private boolean flushPending;

    /** A handler of the protocol whose headers carry {@code magic}; {@code kind} ("control") names it in logs. */
    protected FrameServerHandler(int magic, String kind) {
        super(magic);
        this.kind = kind;
    }

    /** The peer {@code from} said hello ({@code +1}), or its connection closed after it had ({@code -1}). */
    protected abstract void connected(String from, int delta);

    /**
     * A frame other than hello is complete ({@code payload} as in {@link #onFrame}). Returns false for a type the
     * protocol does not have, which closes the connection: the peer is out of step or not speaking this protocol.
     */
    protected abstract boolean onRequest(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload);

    /** Runs when the channel goes down, after the peer is reported disconnected; does nothing here. */
    protected void closed() {}

    /** The name the peer said hello with, or "?" before that. */
    protected final String peer() {
        return peer;
    }

    @Override
    protected final void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        if (h.type() == Frames.HELLO) {
            peer = new String(payload == null ? new byte[0] : payload, StandardCharsets.UTF_8);
            connected(peer, +1);
            counted = true;
        } else if (!onRequest(ctx, h, payload)) {
            log.log(
                    Level.WARNING,
                    () -> "peer " + peer + " sent " + kind + " frame type " + h.type() + "; closing the connection");
            ctx.close();
        }
    }

    /** Answers request {@code id} with a {@code type} frame (region and offset 0) and {@code payload}; flushed soon. */
    protected final void reply(ChannelHandlerContext ctx, byte type, long id, byte[] payload) {
        ctx.write(header(ctx.alloc(), type, 0, id, 0, payload.length));
        if (payload.length > 0) {
            ctx.write(Unpooled.wrappedBuffer(payload));
        }
        flushSoon();
    }

    /** Flushes once at the end of the current read burst rather than per frame. */
    protected final void flushSoon() {
        flushPending = true;
    }

    @Override
    public final void channelReadComplete(ChannelHandlerContext ctx) {
        if (flushPending) {
            flushPending = false;
            ctx.flush();
        }
        ctx.fireChannelReadComplete();
    }

    @Override
    public final void channelInactive(ChannelHandlerContext ctx) {
        if (counted) {
            counted = false;
            connected(peer, -1);
        }
        closed();
        ctx.fireChannelInactive();
    }

    @Override
    public final void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        // a peer that dies resets its connections, which is normal; a frame we cannot parse is not
        log.log(
                cause instanceof IOException ? Level.DEBUG : Level.WARNING,
                kind + " connection from " + peer + " failed; closing it",
                cause);
        ctx.close();
    }
}
