package io.hicache.storage.file;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HexFormat;
import java.util.zip.CRC32C;

/**
 * The header at the start of every page file, little-endian:
 *
 * <pre>
 *  0  magic "HCPG" (4)      4  format version (2)   6  flags (2, zero)
 *  8  data offset (4)      12  CRC-32C of the other 124 header bytes (4)
 * 16  page length (8)      24  page CRC-32C (4)      28  reserved (4, zero)
 * 32  namespace id (16)    48  page hash (32)        80  zero to 128
 * </pre>
 *
 * The page's bytes start at the data offset: right after the header, or at the next block when the file was
 * written with direct I/O, which wants the data block-aligned. The header names its page, so a file renamed or
 * copied to another page's name is caught, and carries its own checksum, so a damaged length is caught before it
 * is used. Immutable.
 *
 * @param dataOffset where the page's bytes start
 * @param pageBytes  the page's length
 * @param pageCrc    CRC-32C of the page's bytes
 * @param id         the page the file holds
 */
record PageFileHeader(int dataOffset, long pageBytes, int pageCrc, PageId id) {
    static final int BYTES = 128;
    static final int MAGIC = 0x47504348; // "HCPG" read as a little-endian int
    static final short VERSION = 1;
    private static final HexFormat HEX = HexFormat.of();

    /** Writes the header into {@code out}'s first {@link #BYTES} bytes (from its position), zeros included. */
    void writeTo(ByteBuffer out) {
        ByteBuffer b = out.slice(out.position(), BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < BYTES; i += 8) {
            b.putLong(i, 0);
        }
        b.putInt(0, MAGIC).putShort(4, VERSION).putShort(6, (short) 0).putInt(8, dataOffset);
        b.putLong(16, pageBytes).putInt(24, pageCrc).putInt(28, 0);
        b.put(32, HEX.parseHex(id.namespaceId()));
        b.put(48, id.hash().toBytes());
        b.putInt(12, headerCrc(b));
    }

    /**
     * Reads a header, or explains in the exception why {@code in} (from its position, at least {@link #BYTES} bytes)
     * is not one.
     */
    static PageFileHeader readFrom(ByteBuffer in) throws BadHeaderException {
        ByteBuffer b = in.slice(in.position(), BYTES).order(ByteOrder.LITTLE_ENDIAN);
        if (b.getInt(0) != MAGIC) {
            throw new BadHeaderException("not a HiCache page file (magic " + Integer.toHexString(b.getInt(0)) + ")");
        }
        if (b.getShort(4) != VERSION) {
            throw new BadHeaderException("page file format version " + b.getShort(4) + ", this store reads " + VERSION);
        }
        if (b.getInt(12) != headerCrc(b)) {
            throw new BadHeaderException("header checksum mismatch");
        }
        byte[] ns = new byte[Namespace.ID_BYTES];
        b.get(32, ns);
        byte[] hash = new byte[PageHash.BYTES];
        b.get(48, hash);
        int dataOffset = b.getInt(8);
        long pageBytes = b.getLong(16);
        if (dataOffset < BYTES || pageBytes < 1) {
            throw new BadHeaderException("data offset " + dataOffset + ", page length " + pageBytes);
        }
        return new PageFileHeader(dataOffset, pageBytes, b.getInt(24), new PageId(HEX.formatHex(ns),
                PageHash.fromBytes(hash, 0)));
    }

    private static int headerCrc(ByteBuffer header) {
        CRC32C crc = new CRC32C();
        crc.update(header.slice(0, 12));
        crc.update(header.slice(16, BYTES - 16));
        return (int) crc.getValue();
    }

    /** A file whose header is missing or damaged. */
    static final class BadHeaderException extends Exception {
        private static final long serialVersionUID = 1L;

        BadHeaderException(String message) {
            super(message);
        }
    }
}
