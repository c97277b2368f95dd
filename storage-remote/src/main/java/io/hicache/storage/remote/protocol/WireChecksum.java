package io.hicache.storage.remote.protocol;

import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

/**
 * The page checksum a connection carries on the wire, agreed in a version 2 HELLO (docs/protocol.md §2): CRC-32C, the
 * protocol's own and the daemon's internal one, or CRC-32 (zlib's), which clients without a fast CRC-32C (Python's
 * standard library) can compute at C speed. Stateless; thread-safe.
 */
public enum WireChecksum {
    /** CRC-32C (Castagnoli): code 0, and the only one of version 1. */
    CRC32C(0),
    /** CRC-32 (ISO-HDLC, zlib's {@code crc32}): code 1. */
    CRC32(1);

    private final int code;

    WireChecksum(int code) {
        this.code = code;
    }

    /** The byte that names it in HELLO. */
    public int code() {
        return code;
    }

    /**
     * The checksum a HELLO's byte names.
     *
     * @throws ProtocolException for a byte that names none
     */
    public static WireChecksum ofCode(int code) {
        for (WireChecksum c : values()) {
            if (c.code == code) {
                return c;
            }
        }
        throw new ProtocolException("checksum " + code + " is not defined (0 CRC-32C, 1 CRC-32)");
    }

    /** The checksum of {@code bytes}' readable bytes, which it does not consume. */
    public int of(ByteBuf bytes) {
        Checksum sum = newChecksum();
        for (ByteBuffer b : bytes.nioBuffers(bytes.readerIndex(), bytes.readableBytes())) {
            sum.update(b);
        }
        return (int) sum.getValue();
    }

    /** The checksum of {@code page}. */
    public int of(MemorySegment page) {
        Checksum sum = newChecksum();
        sum.update(page.asByteBuffer());
        return (int) sum.getValue();
    }

    /** A new running checksum of this kind, for bytes that arrive in pieces. */
    public Checksum newChecksum() {
        return this == CRC32C ? new CRC32C() : new CRC32();
    }
}
