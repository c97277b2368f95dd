package io.hicache.core.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class BatchTypesTest {
    static final Namespace NS = Namespace.of("m", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    static final StoreKey K1 = NS.key(PageHash.fromHex("01".repeat(32)));
    static final StoreKey K2 = NS.key(PageHash.fromHex("02".repeat(32)));

    @Test
    void batchesRejectBadPagesNamingTheIndex() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment page = arena.allocate(64);
            assertEquals(2, PageBatch.of(List.of(K1, K2), List.of(page, page)).size());
            var heap = assertThrows(
                    IllegalArgumentException.class,
                    () -> PageBatch.of(List.of(K1, K2), List.of(page, MemorySegment.ofArray(new byte[64]))));
            assertTrue(heap.getMessage().contains("pages[1] is a heap segment"), heap.getMessage());
            var count =
                    assertThrows(IllegalArgumentException.class, () -> PageBatch.of(List.of(K1), List.of(page, page)));
            assertTrue(count.getMessage().contains("1 keys, 2 pages"), count.getMessage());
            assertThrows(IllegalArgumentException.class, () -> PageBatch.of(List.of(K1), List.of(page.asSlice(0, 0))));
            assertThrows(NullPointerException.class, () -> PageBatch.of(Arrays.asList(K1, null), List.of(page, page)));
            assertThrows(
                    IllegalArgumentException.class,
                    () -> PageBatch.builder(1).add(K1, MemorySegment.ofArray(new long[2])));
            assertEquals(
                    128,
                    PageBatch.builder(2).add(K1, page).add(K2, page).build().totalBytes());
        }
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment mine = confined.allocate(64);
            var e = assertThrows(IllegalArgumentException.class, () -> PageBatch.of(List.of(K1), List.of(mine)));
            assertTrue(e.getMessage().contains("pages[0] is confined"), e.getMessage());
        }
        assertEquals(
                1,
                PageBatch.of(List.of(K1), List.of(Arena.ofAuto().allocate(64))).size());
    }

    @Test
    void resultsCountAndDefaultToFailed() {
        BatchResult r = BatchResult.builder(4)
                .set(0, PageStatus.OK)
                .set(1, PageStatus.EXISTS)
                .set(3, PageStatus.MISS, "not here")
                .build();
        assertEquals(PageStatus.FAILED, r.status(2), "an unset outcome is a failure, never a success");
        assertTrue(r.detail(2).orElseThrow().contains("no outcome"));
        assertEquals(2, r.successCount());
        assertEquals(2, r.leadingSuccesses());
        assertEquals(1, r.count(PageStatus.MISS));
        assertEquals("not here", r.detail(3).orElseThrow());
        assertTrue(r.toString().contains("MISS x1"), r.toString());
        assertEquals(4, BatchResult.all(4, PageStatus.TIMED_OUT, "late").count(PageStatus.TIMED_OUT));
    }
}
