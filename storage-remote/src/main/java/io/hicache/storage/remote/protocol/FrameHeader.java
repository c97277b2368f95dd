package io.hicache.storage.remote.protocol;

import io.netty.buffer.ByteBuf;

/**
 * The 16 bytes after a frame's length (docs/protocol.md §1): {@code op:u8 flags:u8 reserved:u16 request_id:u64
 * timeout_ms:u32}. Read alike by the daemon (requests) and the Java client (answers); written by
 * {@link RequestEncoder} and {@link Codec#beginFrame}. Immutable.
 *
 * @param op            the operation code ({@code Wire}), with {@link Wire#RESPONSE} set on an answer
 * @param flags         the header flags; version 2's LEASE and COMMIT define one each
 *                      ({@link ReadRequest.Lease#NO_CHECKSUMS}, {@link WriteRequest.Commit#NO_CHECKSUMS})
 * @param requestId     chosen by the client, repeated by the answer
 * @param timeoutMillis the request's deadline, counted from when the daemon has read the frame (0: 30 s); 0 in answers
 */
public record FrameHeader(int op, int flags, long requestId, long timeoutMillis) {
    /**
     * Reads a header (the length field already taken off), leaving {@code in} at the payload.
     *
     * @throws ProtocolException when the frame is shorter than a header
     */
    public static FrameHeader read(ByteBuf in) {
        Codec.need(in, Wire.HEADER_BYTES, "header");
        int op = in.readUnsignedByte();
        int flags = in.readUnsignedByte();
        in.skipBytes(2);
        long id = in.readLong();
        long timeoutMillis = in.readUnsignedInt();
        return new FrameHeader(op, flags, id, timeoutMillis);
    }

    /** Writes a frame's length placeholder and this header into {@code out}; {@link Codec#endFrame} fills the length. */
    void writeFrameStart(ByteBuf out) {
        out.writeInt(0);
        out.writeByte(op);
        out.writeByte(flags);
        out.writeShort(0);
        out.writeLong(requestId);
        out.writeInt((int) Math.min(timeoutMillis, 0xFFFF_FFFFL));
    }
}
