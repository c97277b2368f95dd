package io.hicache.server.daemon;

import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.FrameHeader;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import org.jspecify.annotations.Nullable;

/**
 * Writes one connection's answers: response frames with their request's id, ERROR frames, and the closing of the
 * connection after a fatal one ({@link #failAndClose}, after which nothing more the client sent is run). Counts bytes
 * and errors. One per connection, shared by its handshake and request handlers. Thread-safe for answers (Netty queues
 * writes from other threads onto the connection's event loop); {@link #failAndClose} and {@link #closing} are the
 * event loop's.
 */
final class Responder {
    private static final int MAX_MESSAGE_CHARS = 1000;

    private final Channel channel;
    private final ServerMetrics metrics;
    /** Set once the connection is to close: frames the decoder already cut behind the one refused do not run. */
    private boolean closing;

    Responder(Channel channel, ServerMetrics metrics) {
        this.channel = channel;
        this.metrics = metrics;
    }

    Channel channel() {
        return channel;
    }

    /** Whether the connection is closing after a fatal ERROR: frames still arriving are dropped unread. */
    boolean closing() {
        return closing;
    }

    /**
     * The header of a frame that arrived, counted in the bytes in; null when the frame is not to run (the connection is
     * closing, or the header is malformed, which answers ERROR MALFORMED and closes it), in which case the frame is
     * released here. Otherwise the caller owns the frame.
     */
    @Nullable
    FrameHeader receive(ByteBuf frame) {
        if (closing) {
            frame.release();
            return null;
        }
        metrics.bytesIn.inc(frame.readableBytes() + 4L);
        try {
            return FrameHeader.read(frame);
        } catch (ProtocolException e) {
            frame.release();
            failAndClose(0, Wire.E_MALFORMED, e.getMessage());
            return null;
        }
    }

    /** A response buffer to {@code op}, its header written (the length is filled in by {@link #send}). */
    ByteBuf begin(int op, long requestId) {
        return Codec.beginFrame(channel.alloc().directBuffer(64), op | Wire.RESPONSE, requestId, 0);
    }

    /** Fills in the frame's length and writes it. */
    ChannelFuture send(ByteBuf frame) {
        Codec.endFrame(frame);
        metrics.bytesOut.inc(frame.readableBytes());
        return channel.writeAndFlush(frame);
    }

    /** A response of one status per page. */
    void statuses(int op, long requestId, PageStatus[] statuses) {
        ByteBuf out = begin(op, requestId);
        out.writeInt(statuses.length);
        for (PageStatus s : statuses) {
            out.writeByte(Wire.status(s));
        }
        send(out);
    }

    /** An ERROR frame; with {@code close}, the connection is closed once it is written. */
    void fail(long requestId, short code, String message, boolean close) {
        metrics.error(Wire.errorName(code));
        ByteBuf out = Codec.beginFrame(channel.alloc().directBuffer(64), Wire.ERROR, requestId, 0);
        out.writeShort(code);
        Codec.writeString(
                out, message.length() > MAX_MESSAGE_CHARS ? message.substring(0, MAX_MESSAGE_CHARS) : message);
        ChannelFuture written = send(out);
        if (close) {
            written.addListener(ChannelFutureListener.CLOSE);
        }
    }

    /** Answers ERROR and closes the connection; nothing it sent after this frame is run. */
    void failAndClose(long requestId, short code, String message) {
        closing = true;
        fail(requestId, code, message, true);
    }
}
