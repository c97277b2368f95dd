package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.HiCacheTest.unclosable;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.hicache.core.key.Namespace;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Issue 19, part 5: an MLA model's pages are the same on every tensor-parallel rank, so the ranks share one copy in
 * the page store, written by one rank ({@code hicache-mla-upload-rank}) and read by all.
 */
class MlaRanksTest {
    private static final KvGeometry MLA = KvGeometry.mla(2, 8, 4, KvDtype.BFLOAT16);
    private static final KvGeometry MHA = TestEngine.GEOMETRY;

    private static Namespace rank(int rank, int size) {
        return Namespace.of("mla-model", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, rank, size);
    }

    private static TestEngine engine(
            Map<String, String> settings, InMemoryPageStore store, KvGeometry geometry, int rank) {
        return new TestEngine(settings, 64, unclosable(store), null, geometry, rank(rank, 2));
    }

    @Test
    void twoMlaRanksStoreEachPageOnceAndBothReadIt() throws Exception {
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        Map<String, String> s = settings("hicache-storage-prefetch-policy", "wait_complete");
        int[] p = prompt(31_000, 64); // 16 pages
        try (TestEngine rank0 = engine(s, store, MLA, 0);
                TestEngine rank1 = engine(s, store, MLA, 1)) {
            assertEquals(rank0.cache.namespace(), rank1.cache.namespace(), "no rank in an MLA namespace");
            rank0.serve("r0", p);
            rank1.serve("r1", p);
            rank0.quiesce();
            rank1.quiesce();
            assertEquals(16, store.stats().storedPages(), "each page once");
            assertEquals(16, store.stats().putPages(), "only the upload rank wrote");
            assertEquals(16, rank0.cache.stats().uploadedPages());
            assertEquals(0, rank1.cache.stats().uploadedPages());

            // rank 1 forgets its copy and reads rank 0's, byte for byte (serve checks them against its own pattern)
            rank1.cache.admin().flush(Duration.ofSeconds(10));
            TestEngine.Served back = rank1.serve("r1-again", p);
            assertEquals(64, back.outcome().storeTokens(), back::toString);
            rank1.quiesce();
            rank1.cache.core().checkConsistency();
        } finally {
            store.close();
        }
    }

    @Test
    void mhaRanksKeepTheirOwnPages() throws Exception {
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        int[] p = prompt(32_000, 64);
        try (TestEngine rank0 = engine(settings(), store, MHA, 0);
                TestEngine rank1 = engine(settings(), store, MHA, 1)) {
            assertNotEquals(rank0.cache.namespace(), rank1.cache.namespace());
            rank0.serve("r0", p);
            rank1.serve("r1", p);
            rank0.quiesce();
            rank1.quiesce();
            assertEquals(32, store.stats().storedPages(), "each rank holds its own heads");
        } finally {
            store.close();
        }
    }

    @Test
    void anUploadRankOutsideTheModelIsRefused() {
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        try {
            assertThrows(
                    IllegalArgumentException.class,
                    () -> engine(settings("hicache-mla-upload-rank", "2"), store, MLA, 0)
                            .close());
        } finally {
            store.close();
        }
    }
}
