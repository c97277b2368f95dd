package io.hicache.storage.nixl;

import io.hicache.core.key.PageRecordDescriptor;
import io.hicache.core.key.StoreKey;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * The 64 bytes stored after each page, in the same file or object, so that one transfer of two descriptors moves a
 * page and its proof: a {@link PageRecordDescriptor page record} tagged {@code HCN1}, with the page's CRC-32C, its
 * length and its key (a page put under the wrong name reads as corrupt). Stateless.
 */
final class PageTrailer {
    static final int BYTES = PageRecordDescriptor.LENGTH;
    private static final int MAGIC = 0x314E4348; // "HCN1" read little-endian

    private PageTrailer() {}

    /** Writes the trailer of {@code key}'s page of {@code length} bytes with checksum {@code crc} into {@code dst}. */
    static void write(MemorySegment dst, StoreKey key, long length, int crc) {
        PageRecordDescriptor.write(dst, 0, MAGIC, crc, length, PageRecordDescriptor.keyBytes(key));
    }

    /** Why {@code trailer} does not vouch for {@code page} as {@code key}, or null when it does. */
    static @Nullable String problem(MemorySegment trailer, StoreKey key, MemorySegment page, int pageCrc) {
        if (PageRecordDescriptor.tag(trailer, 0) != MAGIC) {
            return "no page trailer: not written by this store";
        }
        long length = PageRecordDescriptor.pageLength(trailer, 0);
        if (length != page.byteSize()) {
            return "the trailer says " + length + " bytes, the page has " + page.byteSize();
        }
        if (!PageRecordDescriptor.hasKey(trailer, 0, PageRecordDescriptor.keyBytes(key))) {
            return "the page belongs to another key";
        }
        if (PageRecordDescriptor.pageCrc(trailer, 0) != pageCrc) {
            return "page checksum mismatch";
        }
        return null;
    }
}
