package io.hicache.storage.file;

import io.hicache.core.key.PageRecordDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.zip.CRC32C;

/**
 * The header at the start of every page file: a {@link PageRecordDescriptor page record} (tag {@code "HCPG"}, the
 * page's CRC-32C and length, the page's key), then the file's own fields, little-endian:
 *
 * <pre>
 *   0  page record (64): magic "HCPG" | page CRC-32C | page length | namespace id | page hash
 *  64  format version (2)   66  flags (2, zero)   68  data offset (4)   72  header CRC-32C (4)   76  zero to 128
 * </pre>
 *
 * The page's bytes start at the data offset: right after the header, or at the next block when the file was
 * written with direct I/O, which wants the data block-aligned. The header names its page, so a file renamed or
 * copied to another page's name is caught, and carries its own checksum (of every header byte but its own four),
 * so a damaged length is caught before it is used. Immutable.
 *
 * @param dataOffset where the page's bytes start
 * @param pageBytes  the page's length
 * @param pageCrc    CRC-32C of the page's bytes
 * @param id         the page the file holds
 */
record PageFileHeader(int dataOffset, long pageBytes, int pageCrc, PageId id) {
    static final int BYTES = 128;
    static final int MAGIC = 0x47504348; // "HCPG" read as a little-endian int
    /** 2: the first 64 bytes became a {@link PageRecordDescriptor page record}. */
    static final short VERSION = 2;

    static final int VERSION_OFFSET = PageRecordDescriptor.LENGTH;
    static final int FLAGS_OFFSET = VERSION_OFFSET + Short.BYTES;
    static final int DATA_OFFSET_OFFSET = FLAGS_OFFSET + Short.BYTES;
    static final int HEADER_CRC_OFFSET = DATA_OFFSET_OFFSET + Integer.BYTES;
    private static final ValueLayout.OfShort SHORT =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(PageRecordDescriptor.BYTE_ORDER);
    private static final ValueLayout.OfInt INT =
            ValueLayout.JAVA_INT_UNALIGNED.withOrder(PageRecordDescriptor.BYTE_ORDER);

    /** Writes the header into {@code out}'s first {@link #BYTES} bytes, zeros included. */
    void writeTo(MemorySegment out) {
        MemorySegment h = out.asSlice(0, BYTES);
        h.fill((byte) 0);
        PageRecordDescriptor.write(h, 0, MAGIC, pageCrc, pageBytes, id.toBytes());
        h.set(SHORT, VERSION_OFFSET, VERSION);
        h.set(INT, DATA_OFFSET_OFFSET, dataOffset);
        h.set(INT, HEADER_CRC_OFFSET, headerCrc(h));
    }

    /** Reads a header, or explains in the exception why {@code in} (at least {@link #BYTES} bytes) is not one. */
    static PageFileHeader readFrom(MemorySegment in) throws BadHeaderException {
        MemorySegment h = in.asSlice(0, BYTES);
        int magic = PageRecordDescriptor.tag(h, 0);
        if (magic != MAGIC) {
            throw new BadHeaderException("not a HiCache page file (magic " + Integer.toHexString(magic) + ")");
        }
        short version = h.get(SHORT, VERSION_OFFSET);
        if (version != VERSION) {
            throw new BadHeaderException("page file format version " + version + ", this store reads " + VERSION);
        }
        if (h.get(INT, HEADER_CRC_OFFSET) != headerCrc(h)) {
            throw new BadHeaderException("header checksum mismatch");
        }
        int dataOffset = h.get(INT, DATA_OFFSET_OFFSET);
        long pageBytes = PageRecordDescriptor.pageLength(h, 0);
        if (dataOffset < BYTES || pageBytes < 1) {
            throw new BadHeaderException("data offset " + dataOffset + ", page length " + pageBytes);
        }
        return new PageFileHeader(
                dataOffset,
                pageBytes,
                PageRecordDescriptor.pageCrc(h, 0),
                PageId.fromBytes(PageRecordDescriptor.key(h, 0)));
    }

    private static int headerCrc(MemorySegment header) {
        CRC32C crc = new CRC32C();
        crc.update(header.asSlice(0, HEADER_CRC_OFFSET).asByteBuffer());
        crc.update(header.asSlice(HEADER_CRC_OFFSET + Integer.BYTES).asByteBuffer());
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
