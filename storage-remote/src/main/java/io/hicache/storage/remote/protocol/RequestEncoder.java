package io.hicache.storage.remote.protocol;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;

/**
 * Turns a {@link Request} into a whole frame, as the Java client sends it: the length, the header, and the payload
 * the record writes ({@link Request#writeTo}). Stateless.
 */
public final class RequestEncoder {
    /** A first guess at a frame's size without bodies: header and namespace, a few keys. */
    private static final int INITIAL_BYTES = 256;

    private RequestEncoder() {}

    /**
     * The frame of {@code request} with id {@code requestId} and a deadline of {@code timeoutMillis} for the daemon
     * (capped at the u32 field), in direct buffers from {@code alloc}. A PUT's bodies are not copied: the frame takes
     * them over (its composite releases them), and releases them here if it cannot be made.
     */
    public static ByteBuf frame(ByteBufAllocator alloc, Request request, long requestId, long timeoutMillis) {
        ByteBuf head = alloc.directBuffer(INITIAL_BYTES);
        try {
            new FrameHeader(request.op(), request.flags(), requestId, timeoutMillis).writeFrameStart(head);
            request.writeTo(head);
        } catch (RuntimeException | Error e) {
            head.release();
            if (request instanceof WriteRequest.Put put) {
                put.bodies().release();
            }
            throw e;
        }
        if (!(request instanceof WriteRequest.Put put)) {
            return Codec.endFrame(head);
        }
        head.setInt(0, head.readableBytes() - 4 + put.bodies().readableBytes());
        CompositeByteBuf frame = alloc.compositeDirectBuffer(2);
        return frame.addComponents(true, head, put.bodies());
    }
}
