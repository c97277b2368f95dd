package io.hicache.transfer.frame;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The frame layout that the engine's control connections and the TCP transport share: a 32-byte header, then
 * {@code length} payload bytes.
 *
 * <pre>
 * 0  u8  type        4  i32 region (or status)     8  i64 id
 * 16 i64 offset      24 i32 length                 28 i32 magic
 * </pre>
 *
 * Each protocol has its own magic and its own request types, so a connection to the wrong port fails on its first
 * header rather than being misread. Responses on one connection come back in request order. Stateless.
 *
 * <p>Two types mean the same in every protocol, because the shared connect and serve code handles them:
 * {@link #HELLO}, the first frame a connecting engine sends, and {@link #ERROR}, the answer to a request that failed.
 * A protocol numbers its own types apart from these.
 */
public final class Frames {
    public static final int HEADER_BYTES = 32;
    /** First frame on every connection; its payload is the connecting engine's name (UTF-8). Never answered. */
    public static final byte HELLO = 1;
    /** Answers a request that failed; its payload is the reason (UTF-8). */
    public static final byte ERROR = 8;
    /** Payloads that are not page bytes (descriptors, messages, reasons) are at most this long. */
    public static final int MAX_CONTROL_PAYLOAD = 16 << 20;

    private Frames() {}

    /** A header in a fresh buffer that the caller writes (and Netty releases). */
    public static ByteBuf header(
            ByteBufAllocator alloc, int magic, byte type, int region, long id, long offset, int length) {
        ByteBuf b = alloc.directBuffer(HEADER_BYTES);
        b.writeByte(type)
                .writeByte(0)
                .writeShort(0)
                .writeInt(region)
                .writeLong(id)
                .writeLong(offset)
                .writeInt(length)
                .writeInt(magic);
        return b;
    }

    /** A decoded header. */
    public record Header(byte type, int region, long id, long offset, int length) {
        static Header parse(ByteBuf b, int expectedMagic) {
            byte type = b.getByte(0);
            int region = b.getInt(4);
            long id = b.getLong(8);
            long offset = b.getLong(16);
            int length = b.getInt(24);
            int magic = b.getInt(28);
            if (magic != expectedMagic || length < 0) {
                throw new IllegalStateException("bad frame header (magic " + Integer.toHexString(magic) + ", length "
                        + length + "): the peer does not speak this protocol");
            }
            return new Header(type, region, id, offset, length);
        }
    }
}
