package io.hicache.testkit;

import io.hicache.core.key.StoreKey;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jspecify.annotations.Nullable;

/**
 * Page contents that any reader can verify from the key alone (or from a number, such as a page index): a
 * xorshift stream seeded by the key, the salt and the page length. No two keys (or salts, or lengths) give the same bytes, and no page is all zeros, so
 * a store that returns another page, a stale page or untouched memory is caught. Stateless.
 */
public final class PagePattern {
    /** The byte that {@link #fillSentinel} writes: what "untouched" target memory looks like. */
    public static final byte SENTINEL = (byte) 0xA5;

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private PagePattern() {}

    /** Fills {@code page} with the pattern of {@code key}. */
    public static void fill(MemorySegment page, StoreKey key) {
        fill(page, key, 0);
    }

    /** Fills {@code page} with the pattern of {@code key} and {@code salt}. */
    public static void fill(MemorySegment page, StoreKey key, long salt) {
        fillSeeded(page, seed(key, salt, page.byteSize()));
    }

    /** Fills {@code page} with the pattern of a plain number, such as a page index and a side tag. */
    public static void fill(MemorySegment page, long seed) {
        fillSeeded(page, mix(seed, page.byteSize()));
    }

    /** The first offset where {@code page} differs from the pattern of {@code seed}, or -1. */
    public static long firstMismatch(MemorySegment page, long seed) {
        return firstMismatchSeeded(page, mix(seed, page.byteSize()));
    }

    private static void fillSeeded(MemorySegment page, long seed) {
        long state = seed;
        long size = page.byteSize();
        long offset = 0;
        for (; offset + Long.BYTES <= size; offset += Long.BYTES) {
            state = next(state);
            page.set(LONG, offset, state);
        }
        state = next(state);
        for (; offset < size; offset++) {
            page.set(ValueLayout.JAVA_BYTE, offset, (byte) (state >>> (8 * (offset & 7))));
        }
    }

    /**
     * The first offset where {@code page} differs from the pattern of {@code key} and {@code salt}, or -1
     * when every byte matches.
     */
    public static long firstMismatch(MemorySegment page, StoreKey key, long salt) {
        return firstMismatchSeeded(page, seed(key, salt, page.byteSize()));
    }

    private static long firstMismatchSeeded(MemorySegment page, long seed) {
        long state = seed;
        long size = page.byteSize();
        long offset = 0;
        for (; offset + Long.BYTES <= size; offset += Long.BYTES) {
            state = next(state);
            if (page.get(LONG, offset) != state) {
                for (int b = 0; b < Long.BYTES; b++) {
                    if (page.get(ValueLayout.JAVA_BYTE, offset + b) != (byte) (state >>> (8 * b))) {
                        return offset + b;
                    }
                }
            }
        }
        state = next(state);
        for (; offset < size; offset++) {
            if (page.get(ValueLayout.JAVA_BYTE, offset) != (byte) (state >>> (8 * (offset & 7)))) {
                return offset;
            }
        }
        return -1;
    }

    /** True when every byte of {@code page} is the pattern of {@code key} with salt 0. */
    public static boolean matches(MemorySegment page, StoreKey key) {
        return firstMismatch(page, key, 0) < 0;
    }

    /**
     * Where layer {@code layer} of {@code page}, a flat page of {@code format}, differs from the pattern of
     * {@code seed} (part, layer and token of the first row that does), or null when the layer matches: for copies that
     * move some layers only.
     */
    public static @Nullable String layerMismatch(PageFormat format, MemorySegment page, long seed, int layer) {
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment expected = scratch.allocate(format.pageBytes());
            fill(expected, seed);
            for (int part = 0; part < format.geometry().attention().parts(); part++) {
                for (int token = 0; token < format.pageSizeTokens(); token++) {
                    long off = format.rowOffset(part, layer, token);
                    if (MemorySegment.mismatch(
                                    page, off, off + format.rowBytes(), expected, off, off + format.rowBytes())
                            >= 0) {
                        return "part " + part + ", layer " + layer + ", token " + token + " differ";
                    }
                }
            }
        }
        return null;
    }

    /** Fills {@code page} with {@link #SENTINEL}, to check later that nothing wrote it. */
    public static void fillSentinel(MemorySegment page) {
        page.fill(SENTINEL);
    }

    /** True when every byte of {@code page} is still {@link #SENTINEL}. */
    public static boolean isSentinel(MemorySegment page) {
        long pattern = 0xA5A5A5A5A5A5A5A5L;
        long size = page.byteSize();
        long offset = 0;
        for (; offset + Long.BYTES <= size; offset += Long.BYTES) {
            if (page.get(LONG, offset) != pattern) {
                return false;
            }
        }
        for (; offset < size; offset++) {
            if (page.get(ValueLayout.JAVA_BYTE, offset) != SENTINEL) {
                return false;
            }
        }
        return true;
    }

    private static long seed(StoreKey key, long salt, long length) {
        return mix(
                key.hash().prefix64()
                        ^ (key.namespace().id().hashCode() * 0x9E3779B97F4A7C15L)
                        ^ (salt * 0xC2B2AE3D27D4EB4FL),
                length);
    }

    private static long mix(long seed, long length) {
        long s = (seed + 0x632BE59BD9B4E019L) * 0x9E3779B97F4A7C15L ^ (length * 0x165667B19E3779F9L);
        s ^= s >>> 29;
        return s == 0 ? 0x2545F4914F6CDD1DL : s;
    }

    private static long next(long x) {
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        return x;
    }
}
