package io.hicache.core.memory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Page contents derived from a seed (never zeros), to fill and check pages in core's tests. Stateless. */
public final class TestPages {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private TestPages() {}

    /** Fills {@code page} (a multiple of 8 bytes) with the pattern of {@code seed}. */
    public static void fill(MemorySegment page, long seed) {
        long x = start(seed);
        for (long off = 0; off < page.byteSize(); off += 8) {
            x = next(x);
            page.set(LONG, off, x);
        }
    }

    /** The first offset where {@code page} differs from the pattern of {@code seed}, or -1. */
    public static long mismatch(MemorySegment page, long seed) {
        long x = start(seed);
        for (long off = 0; off < page.byteSize(); off += 8) {
            x = next(x);
            if (page.get(LONG, off) != x) {
                return off;
            }
        }
        return -1;
    }

    /** A seed from the 48-byte index key of a page (namespace id, then page hash). */
    public static long seedOf(byte[] indexKey) {
        long s = 0;
        for (int i = 0; i < indexKey.length; i++) {
            s = s * 31 + indexKey[i];
        }
        return s;
    }

    private static long start(long seed) {
        long s = (seed + 0x632BE59BD9B4E019L) * 0x9E3779B97F4A7C15L;
        return s == 0 ? 1 : s;
    }

    private static long next(long x) {
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        return x;
    }
}
