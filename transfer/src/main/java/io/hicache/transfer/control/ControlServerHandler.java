package io.hicache.transfer.control;

import io.hicache.transfer.frame.FrameHandler;
import io.hicache.transfer.frame.Frames;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * The listener's side of one control connection: answers describe and ping, and hands messages to the engine. Every
 * payload is small and collected whole. Runs on the channel's event loop.
 */
final class ControlServerHandler extends FrameHandler {
    private static final System.Logger LOG = System.getLogger(ControlServerHandler.class.getName());

    private final ControlHost host;
    private String peer = "?";
    private boolean counted;
    private boolean flushPending;

    ControlServerHandler(ControlHost host) {
        super(ControlFrames.MAGIC);
        this.host = host;
    }

    @Override
    protected MemorySegment payloadTarget(Frames.Header h) {
        return null;
    }

    @Override
    protected void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte[] payload) {
        byte[] body = payload == null ? new byte[0] : payload;
        switch (h.type()) {
            case ControlFrames.HELLO -> {
                peer = new String(body, StandardCharsets.UTF_8);
                host.connected(peer, +1);
                counted = true;
            }
            case ControlFrames.DESCRIBE -> reply(ctx, ControlFrames.DESCRIPTOR, h.id(), host.describe());
            case ControlFrames.MESSAGE -> host.message(peer, body);
            case ControlFrames.PING -> reply(ctx, ControlFrames.PONG, h.id(), new byte[0]);
            default -> {
                LOG.log(Level.WARNING, () -> "peer " + peer + " sent control frame type " + h.type()
                        + "; closing the connection");
                ctx.close();
            }
        }
    }

    private void reply(ChannelHandlerContext ctx, byte type, long id, byte[] payload) {
        ctx.write(header(ctx.alloc(), type, 0, id, 0, payload.length));
        if (payload.length > 0) {
            ctx.write(Unpooled.wrappedBuffer(payload));
        }
        flushPending = true;
    }

    /** Flushes once at the end of the current read burst rather than per frame. */
    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        if (flushPending) {
            flushPending = false;
            ctx.flush();
        }
        ctx.fireChannelReadComplete();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (counted) {
            counted = false;
            host.connected(peer, -1);
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        // a peer that dies resets its connections, which is normal; a frame we cannot parse is not
        LOG.log(cause instanceof java.io.IOException ? Level.DEBUG : Level.WARNING,
                "control connection from " + peer + " failed; closing it", cause);
        ctx.close();
    }
}
