package io.hicache.transfer.pd;

import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The KV a fake prefill "computes": every 8-byte word is a function of (room, token position, layer, part, global
 * head, word), so a decode rank can check the heads it holds whatever tensor-parallel split either side has.
 * Stateless.
 */
public final class KvPatterns {
    private KvPatterns() {}

    static long word(long room, int position, int token, int layer, int part, int head, int k) {
        long z = room * 0x9E3779B97F4A7C15L
                ^ ((long) position << 40
                        | (long) token << 28
                        | (long) layer << 18
                        | (long) part << 16
                        | (long) head << 8
                        | k);
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return (z ^ (z >>> 31)) | 1L;
    }

    /** Writes positions {@code [from, to)} of {@code room} into {@code pages[position]} of a rank's pool. */
    public static void fill(RankSpec spec, MemorySegment kv, long room, int[] pages, int from, int to) {
        visit(spec, kv, room, pages, from, to, true);
    }

    /** Whether positions {@code [from, to)} of {@code room} are in {@code pages[position]} of a rank's pool. */
    public static boolean matches(RankSpec spec, MemorySegment kv, long room, int[] pages, int from, int to) {
        return visit(spec, kv, room, pages, from, to, false);
    }

    private static boolean visit(
            RankSpec spec, MemorySegment kv, long room, int[] pages, int from, int to, boolean write) {
        PageFormat f = spec.format();
        int heads = spec.heads();
        long headBytes = f.rowBytes() / heads;
        int words = (int) (headBytes / 8);
        for (int p = from; p < to; p++) {
            for (int layer = 0; layer < f.geometry().layers(); layer++) {
                for (int part = 0; part < f.geometry().attention().parts(); part++) {
                    long base = DeviceLayout.chunkOffset(f, spec.kvPages(), pages[p], layer, part);
                    for (int t = 0; t < f.pageSizeTokens(); t++) {
                        for (int h = 0; h < heads; h++) {
                            long at = base + t * f.rowBytes() + h * headBytes;
                            for (int k = 0; k < words; k++) {
                                long w = word(room, p, t, layer, part, spec.firstHead() + h, k);
                                if (write) {
                                    kv.set(ValueLayout.JAVA_LONG_UNALIGNED, at + 8L * k, w);
                                } else if (kv.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 8L * k) != w) {
                                    return false;
                                }
                            }
                        }
                    }
                }
            }
        }
        return true;
    }
}
