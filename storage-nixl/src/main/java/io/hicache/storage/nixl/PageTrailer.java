package io.hicache.storage.nixl;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The 64 bytes stored after each page, in the same file or object, so that one transfer of two descriptors moves a
 * page and its proof: magic {@code HCN1}, the page's CRC-32C, its length, the namespace id and the page hash (a page
 * put under the wrong name reads as corrupt). Little-endian. Stateless.
 */
final class PageTrailer {
    static final int BYTES = 64;
    private static final int MAGIC = 0x314E4348; // "HCN1" read little-endian
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private PageTrailer() {
    }

    /** Writes the trailer of {@code key}'s page of {@code length} bytes with checksum {@code crc} into {@code dst}. */
    static void write(MemorySegment dst, StoreKey key, long length, int crc) {
        dst.set(INT, 0, MAGIC);
        dst.set(INT, 4, crc);
        dst.set(LONG, 8, length);
        MemorySegment.copy(MemorySegment.ofArray(nameBytes(key)), 0, dst, 16, 48);
    }

    /** Why {@code trailer} does not vouch for {@code page} as {@code key}, or null when it does. */
    static String problem(MemorySegment trailer, StoreKey key, MemorySegment page, int pageCrc) {
        if (trailer.get(INT, 0) != MAGIC) {
            return "no page trailer: not written by this store";
        }
        if (trailer.get(LONG, 8) != page.byteSize()) {
            return "the trailer says " + trailer.get(LONG, 8) + " bytes, the page has " + page.byteSize();
        }
        byte[] name = new byte[48];
        MemorySegment.copy(trailer, ValueLayout.JAVA_BYTE, 16, name, 0, 48);
        if (!Arrays.equals(name, nameBytes(key))) {
            return "the page belongs to another key";
        }
        if (trailer.get(INT, 4) != pageCrc) {
            return "page checksum mismatch";
        }
        return null;
    }

    private static byte[] nameBytes(StoreKey key) {
        byte[] name = new byte[Namespace.ID_BYTES + PageHash.BYTES];
        key.namespace().writeIdTo(name, 0);
        key.hash().writeTo(name, Namespace.ID_BYTES);
        return name;
    }
}
