package io.hicache.core.cache;

import static io.hicache.core.cache.TinyCache.PAGE;
import static io.hicache.core.cache.TinyCache.concat;
import static io.hicache.core.cache.TinyCache.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.PageFormat;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link HiCache#prefixHits} (issue 42, part 3) against caches whose tiers are known to differ: each tier's leading
 * run is counted from the prompt's first page, whole pages only, and the query changes nothing (no recency, no split,
 * no pin).
 */
class PrefixHitsTest {
    private static final Duration SECONDS = Duration.ofSeconds(5);

    @Test
    void eachTierCountsItsOwnLeadingRun() throws Exception {
        try (TinyCache t = TinyCache.withHost(16, new InMemoryPageStore(64L << 20), "hicache-ratio", "2")) {
            int[] prompt = prompt(100, 12);
            t.serve(prompt); // 12 pages on every tier: the device, the host (write-through), the store (uploaded)
            t.settle();
            t.cache.admin().flush(SECONDS); // the device and the host forget them; the store keeps them
            t.serve(Arrays.copyOf(prompt, 4 * PAGE));
            t.serve(Arrays.copyOf(prompt, 8 * PAGE)); // two runs of 4 pages, on the device and the host
            t.settle();
            t.serve(prompt(5000, 12)); // 8 free of 16: the older run of 4 leaves the device, stays on the host
            t.settle();

            PrefixHits hits = t.cache.prefixHits("", prompt, SECONDS).get(10, TimeUnit.SECONDS);
            assertEquals(new PrefixHits(PAGE, 4, 8, 12, PrefixHits.StoreAnswer.COUNTED), hits);
            assertEquals(16, hits.deviceTokens());
            assertEquals(32, hits.hostTokens());
            assertEquals(48, hits.storeTokens());

            int[] partial = concat(prompt, new int[] {1, 2, 3}); // a trailing partial page is never a hit
            assertEquals(hits, t.cache.prefixHits("", partial, SECONDS).get(10, TimeUnit.SECONDS));
            int[] parted = concat(Arrays.copyOf(prompt, 2 * PAGE), prompt(9000, 6)); // the same first 2 pages only
            assertEquals(
                    new PrefixHits(PAGE, 2, 2, 2, PrefixHits.StoreAnswer.COUNTED),
                    t.cache.prefixHits("", parted, SECONDS).get(10, TimeUnit.SECONDS));
            assertEquals(
                    new PrefixHits(PAGE, 0, 0, 0, PrefixHits.StoreAnswer.COUNTED),
                    t.cache.prefixHits("adapter-7", prompt, SECONDS).get(10, TimeUnit.SECONDS),
                    "another extra key's pages are other pages, in the store too");
            assertEquals(
                    new PrefixHits(PAGE, 4, 8, 0, PrefixHits.StoreAnswer.NOT_ASKED),
                    t.cache.prefixHitsInMemory("", prompt));
            assertTrue(t.cache.nothingPinned(), "the queries pin nothing");
            t.settle();
        }
    }

    @Test
    void aQueryTouchesNoRecencyAndSplitsNothing() throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8)) {
            int[] older = prompt(100, 2);
            int[] newer = prompt(200, 2);
            t.serve(older);
            t.serve(newer);
            long nodes = t.cache.stats().treeNodes();
            for (int i = 0; i < 3; i++) {
                assertEquals(8, t.cache.prefixHitsInMemory("", older).deviceTokens());
                assertEquals(
                        4,
                        t.cache
                                .prefixHitsInMemory("", Arrays.copyOf(older, PAGE))
                                .deviceTokens());
            }
            assertEquals(nodes, t.cache.stats().treeNodes(), "a query ending inside a node does not split it");
            t.serve(prompt(300, 6)); // 4 free, 6 wanted: the least recently used goes, as if never asked about
            assertEquals(0, t.onDevice(older));
            assertEquals(8, t.onDevice(newer));
            assertEquals(
                    new PrefixHits(PAGE, 0, 0, 0, PrefixHits.StoreAnswer.NO_STORE),
                    t.cache.prefixHits("", older, SECONDS).get(10, TimeUnit.SECONDS));
            t.settle();
        }
    }

    @Test
    void aStoreThatDoesNotAnswerIsReportedSoAndThenNotAsked() throws Exception {
        SilentStore store = new SilentStore();
        try (TinyCache t = TinyCache.withHost(8, store, "hicache-ratio", "2")) {
            int[] prompt = prompt(100, 3);
            t.serve(prompt);
            t.settle();
            store.silent = true;
            long start = System.nanoTime();
            PrefixHits first =
                    t.cache.prefixHits("", prompt, Duration.ofMillis(50)).get(10, TimeUnit.SECONDS);
            assertEquals(new PrefixHits(PAGE, 3, 3, 0, PrefixHits.StoreAnswer.NO_ANSWER), first);
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "given up at the deadline and grace");
            CompletableFuture<PrefixHits> second = t.cache.prefixHits("", prompt, SECONDS);
            assertTrue(second.isDone(), "a store known to be silent is not asked again at once");
            assertEquals(PrefixHits.StoreAnswer.NO_ANSWER, second.get().store());
        }
    }

    /** A store that drops what it is given, and once {@link #silent}, never answers a hit query: hung, say. */
    private static final class SilentStore extends AbstractPageStore {
        volatile boolean silent;

        SilentStore() {
            super("silent", "nowhere", new StoreCapabilities(Set.of(), PageFormat.MAX_PAGE_BYTES, 256));
        }

        @Override
        protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
            return silent ? new CompletableFuture<>() : CompletableFuture.completedFuture(0);
        }

        @Override
        protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
            return CompletableFuture.failedFuture(new IllegalStateException("silent"));
        }

        @Override
        protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
            return CompletableFuture.completedFuture(BatchResult.all(sources.size(), PageStatus.OK, "dropped"));
        }

        @Override
        protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
            return CompletableFuture.failedFuture(new IllegalStateException("silent"));
        }

        @Override
        protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
            return CompletableFuture.completedFuture(null);
        }

        @Override
        protected CompletableFuture<Void> doClearAll(Deadline deadline) {
            return CompletableFuture.completedFuture(null);
        }

        @Override
        protected void doClose() {}
    }
}
