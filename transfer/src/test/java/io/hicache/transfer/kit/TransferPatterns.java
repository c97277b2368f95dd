package io.hicache.transfer.kit;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Byte patterns for transfer tests: every 8-byte word is a mix of its offset and a seed, so a byte that lands at
 * the wrong place, or a range that was not moved, differs from what is expected. Stateless.
 */
public final class TransferPatterns {
    private TransferPatterns() {}

    /** The expected word at {@code offset} (a multiple of 8) for {@code seed}. */
    public static long word(long seed, long offset) {
        long z = seed * 0x9E3779B97F4A7C15L + offset;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return (z ^ (z >>> 31)) | 0x0101010101010101L;
    }

    /** Fills {@code memory} with the pattern of {@code seed}, as if it started at offset 0. */
    public static void fill(MemorySegment memory, long seed) {
        long n = memory.byteSize() & ~7L;
        for (long off = 0; off < n; off += 8) {
            memory.set(ValueLayout.JAVA_LONG_UNALIGNED, off, word(seed, off));
        }
        for (long off = n; off < memory.byteSize(); off++) {
            memory.set(ValueLayout.JAVA_BYTE, off, (byte) 0x5A);
        }
    }

    /**
     * Whether {@code actual} holds the pattern of {@code seed} as it is at {@code [from, from + actual.byteSize())}
     * of a region filled with {@link #fill}; {@code regionBytes} is that region's size.
     */
    public static boolean matches(MemorySegment actual, long seed, long from, long regionBytes) {
        long tailStart = regionBytes & ~7L;
        for (long i = 0; i < actual.byteSize(); i++) {
            long at = from + i;
            byte expected = at >= tailStart ? (byte) 0x5A : (byte) (word(seed, at & ~7L) >>> (8 * (at & 7)));
            if (actual.get(ValueLayout.JAVA_BYTE, i) != expected) {
                return false;
            }
        }
        return true;
    }
}
