package io.hicache.transfer.tcp;

import io.hicache.core.util.Checks;
import io.hicache.transfer.frame.FrameServerHandler;
import io.hicache.transfer.frame.Frames;
import io.hicache.transfer.spi.LocalSegment;
import io.hicache.transfer.spi.RegisteredRegion;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * The serving side of one data connection: applies writes into registered regions (the payload lands in place) and
 * serves reads from them (sent without a copy). A request for an unknown region or a range outside it gets an ERROR
 * frame naming the problem; its payload is read and dropped so the connection stays in step. Runs on the channel's
 * event loop; the transport's listener owns it.
 */
final class ServerHandler extends FrameServerHandler {
    private final LocalSegment host;
    /** The region a write payload is landing in, held acquired until the payload is complete. */
    private @Nullable RegisteredRegion writing;

    private @Nullable String writeError;

    ServerHandler(LocalSegment host) {
        super(TcpFrames.MAGIC, "data");
        this.host = host;
    }

    @Override
    protected void connected(String from, int delta) {
        host.inbound(from, delta);
    }

    @Override
    protected int payloadBytes(Frames.Header h) {
        return h.type() == TcpFrames.READ ? 0 : h.length();
    }

    @Override
    protected @Nullable MemorySegment payloadTarget(Frames.Header h) {
        if (h.type() != TcpFrames.WRITE) {
            return null;
        }
        RegisteredRegion region = host.region(h.region());
        writeError = check(region, h);
        if (writeError != null || region == null) { // check() fails a missing region
            return DISCARD;
        }
        if (!region.acquire()) {
            writeError = "region " + region.name() + " was unregistered";
            return DISCARD;
        }
        writing = region;
        return region.memory().asSlice(h.offset(), h.length());
    }

    /** Why {@code h} cannot be served from {@code region} (never null when there is no region), or null. */
    private static @Nullable String check(@Nullable RegisteredRegion region, Frames.Header h) {
        if (region == null) {
            return "no region #" + h.region() + " in this segment";
        }
        if (!region.contains(h.offset(), h.length())) {
            return "range [" + h.offset() + ", +" + h.length() + ") is outside region " + region.name() + " (#"
                    + region.id() + ", " + region.memory().byteSize() + " bytes)";
        }
        return null;
    }

    @Override
    protected boolean onRequest(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        switch (h.type()) {
            case TcpFrames.WRITE -> {
                if (writing != null) {
                    writing.release();
                    writing = null;
                    ctx.write(header(ctx.alloc(), TcpFrames.WRITE_ACK, 0, h.id(), h.offset(), 0));
                    flushSoon();
                } else {
                    reply(
                            ctx,
                            Frames.ERROR,
                            h.id(),
                            (writeError == null ? "write failed" : writeError).getBytes(StandardCharsets.UTF_8));
                }
                writeError = null;
            }
            case TcpFrames.READ -> read(ctx, h);
            default -> {
                return false;
            }
        }
        return true;
    }

    private void read(ChannelHandlerContext ctx, Frames.Header h) {
        RegisteredRegion region = host.region(h.region());
        String error = check(region, h);
        if (error == null
                && !Checks.checkNotNull(region, "a region check() accepted").acquire()) {
            error = "region " + region.name() + " was unregistered";
        }
        if (error != null) {
            reply(ctx, Frames.ERROR, h.id(), error.getBytes(StandardCharsets.UTF_8));
            return;
        }
        RegisteredRegion acquired = Checks.checkNotNull(region, "a region check() accepted");
        ctx.write(header(ctx.alloc(), TcpFrames.READ_DATA, h.region(), h.id(), h.offset(), h.length()));
        ByteBuf data = Unpooled.wrappedBuffer(
                acquired.memory().asSlice(h.offset(), h.length()).asByteBuffer());
        // the region stays acquired until the socket took the bytes, so unregistering waits for them
        ctx.write(data).addListener((ChannelFutureListener) f -> acquired.release());
        flushSoon();
    }

    /** Releases a region a write payload was landing in when the connection died mid-payload. */
    @Override
    protected void closed() {
        if (writing != null) {
            writing.release();
            writing = null;
        }
    }
}
