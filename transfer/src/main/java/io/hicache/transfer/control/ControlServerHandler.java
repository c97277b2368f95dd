package io.hicache.transfer.control;

import io.hicache.transfer.frame.FrameServerHandler;
import io.hicache.transfer.frame.Frames;
import io.netty.channel.ChannelHandlerContext;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * The listener's side of one control connection: answers describe and ping, and hands messages to the engine. Every
 * payload is small and collected whole. Runs on the channel's event loop; the control plane's listener owns it.
 */
final class ControlServerHandler extends FrameServerHandler {
    private final ControlHost host;

    ControlServerHandler(ControlHost host) {
        super(ControlFrames.MAGIC, "control");
        this.host = host;
    }

    @Override
    protected @Nullable MemorySegment payloadTarget(Frames.Header h) {
        return null;
    }

    @Override
    protected void connected(String from, int delta) {
        host.connected(from, delta);
    }

    @Override
    protected boolean onRequest(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        switch (h.type()) {
            case ControlFrames.DESCRIBE -> reply(ctx, ControlFrames.DESCRIPTOR, h.id(), host.describe());
            case ControlFrames.MESSAGE -> host.message(peer(), payload == null ? new byte[0] : payload);
            case ControlFrames.PING -> reply(ctx, ControlFrames.PONG, h.id(), new byte[0]);
            default -> {
                return false;
            }
        }
        return true;
    }
}
