package io.hicache.transfer.tcp;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The wire format of the engine's connections: a 32-byte header, then {@code length} payload bytes.
 *
 * <pre>
 * 0  u8  type        4  i32 region (or status)     8  i64 id
 * 16 i64 offset      24 i32 length                 28 i32 magic
 * </pre>
 *
 * Responses on one connection come back in request order. Stateless.
 */
public final class Frames {
    public static final int HEADER_BYTES = 32;
    public static final int MAGIC = 0x48435846; // "HCXF"
    /** Payloads that are not page bytes (descriptors, messages, reasons) are at most this long. */
    public static final int MAX_CONTROL_PAYLOAD = 16 << 20;

    public static final byte HELLO = 1;
    public static final byte DESCRIBE = 2;
    public static final byte DESCRIPTOR = 3;
    public static final byte WRITE = 4;
    public static final byte WRITE_ACK = 5;
    public static final byte READ = 6;
    public static final byte READ_DATA = 7;
    public static final byte ERROR = 8;
    public static final byte MESSAGE = 9;
    public static final byte PING = 10;
    public static final byte PONG = 11;

    private Frames() {
    }

    /** A header in a fresh buffer that the caller writes (and Netty releases). */
    public static ByteBuf header(ByteBufAllocator alloc, byte type, int region, long id, long offset, int length) {
        ByteBuf b = alloc.directBuffer(HEADER_BYTES);
        b.writeByte(type).writeByte(0).writeShort(0).writeInt(region).writeLong(id).writeLong(offset)
                .writeInt(length).writeInt(MAGIC);
        return b;
    }

    /** A decoded header. */
    public record Header(byte type, int region, long id, long offset, int length) {
        static Header parse(ByteBuf b) {
            byte type = b.getByte(0);
            int region = b.getInt(4);
            long id = b.getLong(8);
            long offset = b.getLong(16);
            int length = b.getInt(24);
            int magic = b.getInt(28);
            if (magic != MAGIC || length < 0) {
                throw new IllegalStateException("bad frame header (magic " + Integer.toHexString(magic) + ", length "
                        + length + "): the peer does not speak this protocol");
            }
            return new Header(type, region, id, offset, length);
        }
    }
}
