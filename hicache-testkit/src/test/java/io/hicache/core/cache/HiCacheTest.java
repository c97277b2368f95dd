package io.hicache.core.cache;

import static io.hicache.core.cache.TestEngine.concat;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.testkit.FaultyPageStore;
import io.hicache.testkit.SlowPageStore;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

class HiCacheTest {
    static Map<String, String> settings(String... kv) {
        Map<String, String> m =
                new HashMap<>(Map.of("page-size", "4", "prefetch-threshold", "8", "hicache-ratio", "4"));
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    @Test
    void aRepeatedPromptIsServedFromTheDeviceAndBackedUpToTheHost() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 64, null)) {
            int[] p = prompt(1000, 40);
            assertEquals(0, e.serve("a", p).deviceTokens());
            e.quiesce();
            TestEngine.Served again = e.serve("b", concat(p, prompt(5000, 8)));
            assertEquals(40, again.deviceTokens());
            assertEquals(2, again.computedPages());
            assertEquals(40, again.outcome().deviceTokens());
            assertEquals(8, again.outcome().computedTokens());
            assertEquals(PrefetchOutcome.State.NONE, again.outcome().prefetch().state(), "no page store: no prefetch");
            e.quiesce();
            CacheStats s = e.cache.stats();
            assertTrue(s.backupsCompleted() >= 2, s::toString);
            assertEquals(12, s.hostPages(), "write-through backed every page up");
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void evictedPrefixesComeBackFromTheHostWithTheirBytes() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 24, null)) {
            List<int[]> prompts = List.of(prompt(0, 64), prompt(10_000, 64), prompt(20_000, 64), prompt(30_000, 64));
            for (int i = 0; i < prompts.size(); i++) {
                e.serve("fill-" + i, prompts.get(i));
                e.quiesce();
            }
            // 4 x 16 pages through a 24-page device: the first prompt is host-only now.
            TestEngine.Served back = e.serve("back", prompts.get(0));
            assertEquals(64, back.deviceTokens() + back.hostTokens());
            assertTrue(back.hostTokens() > 0, "nothing was evicted to the host: " + back);
            assertEquals(back.hostTokens(), back.loadedTokens(), "all or nothing");
            e.quiesce();
            assertTrue(e.cache.stats().deviceEvictedPages() > 0);
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void writeThroughSelectiveBacksUpOnTheSecondHit() throws Exception {
        try (TestEngine e = new TestEngine(settings("hicache-write-policy", "write_through_selective"), 64, null)) {
            int[] p = prompt(1, 32);
            e.serve("a", p);
            e.quiesce();
            assertEquals(0, e.cache.stats().backupsStarted());
            e.serve("b", p);
            e.quiesce();
            assertEquals(1, e.cache.stats().backupsCompleted());
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void writeBackCopiesOnlyWhatIsEvicted() throws Exception {
        try (TestEngine e = new TestEngine(settings("hicache-write-policy", "write_back"), 20, null)) {
            e.serve("a", prompt(0, 64));
            e.quiesce();
            assertEquals(0, e.cache.stats().backupsStarted());
            e.serve("b", prompt(50_000, 64)); // needs room: a's pages are backed up, then demoted
            e.quiesce();
            assertTrue(e.cache.stats().backupsCompleted() > 0);
            TestEngine.Served back = e.serve("c", prompt(0, 64));
            assertEquals(64, back.deviceTokens() + back.hostTokens());
            e.quiesce();
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void aSecondEngineGetsThePrefixFromThePageStore() throws Exception {
        InMemoryPageStore shared = new InMemoryPageStore(1L << 30);
        int[] p = prompt(777, 64);
        try (TestEngine first = new TestEngine(settings(), 64, unclosable(shared))) {
            first.serve("a", p);
            first.quiesce();
            assertEquals(16, first.cache.stats().uploadedPages());
            // every tier's own counters moved (issue 40, part 4: a tier that silently did nothing fails here)
            long bytes = 16 * first.cache.format().pageBytes();
            assertEquals(bytes, first.cache.stats().bytesDeviceToHost(), "device to host");
            assertEquals(bytes, first.cache.stats().bytesHostToStore(), "host to store");
            assertEquals(bytes, shared.stats().bytesWritten(), "the store's own count of bytes written");
        }
        try (TestEngine second =
                new TestEngine(settings("hicache-storage-prefetch-policy", "wait_complete"), 64, unclosable(shared))) {
            TestEngine.Served s = second.serve("b", p);
            assertEquals(0, s.deviceTokens());
            assertEquals(64, s.loadedTokens(), "the whole prompt came from the store, through the host");
            assertEquals(0, s.computedPages());
            assertEquals(
                    new RequestOutcome(
                            0,
                            0,
                            64,
                            0,
                            new PrefetchOutcome(PrefetchOutcome.State.ENDED, Optional.empty(), 16, 16),
                            s.outcome().prefetchWait()),
                    s.outcome(),
                    "the request's own account: every token from L3");
            second.quiesce();
            assertEquals(64, second.cache.stats().storageHitTokens());
            long bytes = 16 * second.cache.format().pageBytes();
            assertEquals(bytes, second.cache.stats().bytesStoreToHost(), "store to host");
            assertEquals(bytes, second.cache.stats().bytesHostToDevice(), "host to device");
            assertEquals(bytes, shared.stats().bytesRead(), "the store's own count of bytes read");
            second.cache.core().checkConsistency();
        } finally {
            shared.close();
        }
    }

    @Test
    void bestEffortGoesOnWithWhateverArrivedAndStillChecksBytes() throws Exception {
        InMemoryPageStore shared = new InMemoryPageStore(1L << 30);
        int[] p = prompt(4242, 256);
        try (TestEngine first = new TestEngine(settings(), 128, unclosable(shared))) {
            first.serve("a", p);
            first.quiesce();
        }
        try (TestEngine second = new TestEngine(settings(), 128, unclosable(shared))) {
            TestEngine.Served s = second.serve("b", p); // best_effort: ends at the first check
            assertEquals(256, s.deviceTokens() + s.loadedTokens() + s.computedPages() * 4);
            second.quiesce();
            second.cache.core().checkConsistency();
        } finally {
            shared.close();
        }
    }

    @Test
    void abortReleasesEverythingTheRequestHeld() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 32, null)) {
            e.serve("a", prompt(0, 32));
            e.quiesce();
            CacheRequest r = e.cache.request("b", concat(prompt(0, 32), prompt(900, 32)));
            int[] pages = r.allocate(8);
            assertEquals(8, pages.length);
            r.abort();
            e.quiesce();
            e.cache.core().checkConsistency();
            assertEquals(0, e.cache.core().openRequests().size());
            var ex = assertThrows(IllegalStateException.class, () -> r.allocate(1));
            assertTrue(ex.getMessage().contains("closed"), ex.getMessage());
        }
    }

    @Test
    void aPoolPinnedByRequestsSaysWhyItCannotAllocate() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 8, null)) {
            CacheRequest r = e.cache.request("big", prompt(0, 64));
            r.allocate(8);
            CacheRequest other = e.cache.request("other", prompt(1000, 16)); // its own allocation could fit later
            var ex = assertThrows(HiCacheException.class, () -> other.allocate(1));
            assertEquals(ErrorCode.PAGES_EXHAUSTED, ex.code());
            assertTrue(ex.getMessage().contains("pinned") && ex.getMessage().contains("Temporary"), ex.getMessage());
            other.close();
            r.close();
            e.cache.core().checkConsistency();
        }
    }

    /**
     * Issue 23, item 2: with the host (20 slots) held by a page an upload to a stalled L3 is reading, a write-back
     * eviction cannot back its victim up; the victim must give way (be dropped) rather than stay least recently used
     * and make every later allocation fail with every cached page unpinned.
     */
    @Test
    void aNodeThatCannotBeBackedUpGivesWayInsteadOfPinningTheDevice() throws Exception {
        TroubledPageStore l3 = new TroubledPageStore().stall();
        try (TestEngine e = new TestEngine(
                settings(
                        "hicache-write-policy", "write_back", "hicache-ratio", "1.25", "hicache-storage-timeout", "5s"),
                16,
                l3)) {
            for (int i = 0; i < 4; i++) {
                e.serve("p" + i, prompt(i * 1000, 48)); // 12 pages each: every prompt evicts the one before
                e.quiesceCopies();
                long end = System.nanoTime() + 5_000_000_000L;
                // The upload of what was evicted is being written, its host pages held, once the store has its put:
                // the upload loop takes an upload off its queue before it protects the pages, so an empty queue alone
                // let the next prompt evict them first on a loaded CI machine (and nothing had to give way).
                while ((e.cache.core().uploader.depth() > 0
                                || l3.putCalls() < e.cache.stats().backupsCompleted())
                        && System.nanoTime() < end) {
                    Thread.sleep(1);
                }
            }
            CacheStats s = e.cache.stats();
            assertTrue(s.failures().keySet().stream().anyMatch(k -> k.contains("gave way")), s::toString);
            l3.release();
            e.quiesce();
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency();
        }
    }

    /**
     * Issue 23, item 1: uploads queued behind a stalled L3 must not hold the host: the host keeps evicting (queued
     * uploads of pages that go are dropped and counted), backups keep working, and pages come back from the host.
     */
    @Test
    void aStalledStoreDoesNotFreezeTheHostTier() throws Exception {
        TroubledPageStore l3 = new TroubledPageStore().stall();
        try (TestEngine e = new TestEngine(settings("hicache-storage-timeout", "2s"), 16, l3)) {
            for (int i = 0; i < 12; i++) {
                e.serve("p" + i, prompt(i * 1000, 48)); // 12 pages each: 144 pages through a host of 64
                e.quiesceCopies();
            }
            CacheStats s = e.cache.stats();
            assertEquals(0, s.backupsSkipped(), "backups skipped for lack of host room: " + s);
            assertTrue(s.queueDepths().get("upload-pages") > 0, "the write-behind's lag shows: " + s.queueDepths());
            TestEngine.Served back = e.serve("back", prompt(10 * 1000, 48)); // evicted from the device since
            assertEquals(48, back.deviceTokens() + back.loadedTokens(), "served from the device and the host: " + back);
            List<String> warned = new CopyOnWriteArrayList<>();
            Handler catcher = new Handler() {
                @Override
                public void publish(LogRecord record) {
                    warned.add(record.getMessage());
                }

                @Override
                public void flush() {}

                @Override
                public void close() {}
            };
            Logger log = Logger.getLogger(Uploader.class.getName());
            log.addHandler(catcher);
            try {
                l3.release();
                e.quiesce();
            } finally {
                log.removeHandler(catcher);
            }
            CacheStats after = e.cache.stats();
            assertTrue(after.failures().keySet().stream().anyMatch(k -> k.contains("dropped")), after::toString);
            assertTrue(
                    warned.stream().anyMatch(m -> m.contains("slower than this cache writes")),
                    "the cache says the store is too slow: " + warned);
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency();
        }
    }

    /**
     * Issue 23, item 4: a crowd of requests for one prompt that only the page store has shares one prefetch; none is
     * turned away by the rate limit, and every one gets the whole prompt from the cache.
     */
    @Test
    void aCrowdOfIdenticalRequestsSharesOnePrefetch() throws Exception {
        TroubledPageStore l3 = new TroubledPageStore();
        int[] p = prompt(4242, 64); // 16 pages
        try (TestEngine first = new TestEngine(settings(), 64, FaultyPageStore.sharing(l3))) {
            first.serve("seed", p);
            first.quiesce();
        }
        l3.slowGets(300); // the prefetches of the crowd overlap
        try (TestEngine e = new TestEngine(
                settings("hicache-storage-prefetch-policy", "wait_complete"), 64, FaultyPageStore.sharing(l3))) {
            List<CacheRequest> crowd = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                crowd.add(e.cache.request("crowd-" + i, p));
            }
            CacheStats s = e.cache.stats();
            assertEquals(1, s.prefetchesStarted(), s::toString);
            assertEquals(15L, s.prefetchesSkipped().get(PrefetchSkip.SHARED_WITH_RUNNING), s::toString);
            for (CacheRequest r : crowd) {
                long end = System.nanoTime() + 10_000_000_000L;
                while (!r.tryEndPrefetch() && System.nanoTime() < end) {
                    Thread.sleep(1);
                }
                assertTrue(r.tryEndPrefetch());
                assertTrue(r.loadBack(Integer.MAX_VALUE).await(Duration.ofSeconds(10)));
                assertEquals(16, r.prefixPages().length, "request " + r.id() + " gets the whole prompt from the cache");
                assertEquals("fetched 16 of 16 pages", r.outcome().prefetch().toString());
                e.verify(p, r.prefixPages());
            }
            crowd.forEach(CacheRequest::close);
            e.quiesce();
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency();
        } finally {
            l3.close();
        }
    }

    /** Issue 23, item 7: device-only mode runs the radix tree on the device pool alone, with no host pool at all. */
    @Test
    void deviceOnlyModeCachesOnTheDeviceAloneAndOpensNoHostPool() throws Exception {
        try (TestEngine e = new TestEngine(settings("hicache-tiers", "device-only"), 24, null)) {
            int[] p = prompt(0, 64);
            e.serve("first", p);
            TestEngine.Served again = e.serve("again", p);
            assertEquals(64, again.deviceTokens(), "a repeated prompt is served from the device");
            for (int i = 1; i <= 3; i++) {
                e.serve("push-" + i, prompt(i * 10_000, 64)); // 16 pages each through 24: the first goes
            }
            TestEngine.Served back = e.serve("back", p);
            assertEquals(0, back.deviceTokens() + back.hostTokens(), "evicted means gone: " + back);
            assertEquals(16, back.computedPages());
            e.quiesce();
            CacheStats s = e.cache.stats();
            assertEquals(0, s.hostPages());
            assertEquals(0, s.backupsStarted(), s::toString);
            try (var files = Files.list(e.hostDir)) {
                assertEquals(0, files.count(), "no host pool was opened");
            }
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency();
        }
        var refused = assertThrows(
                HiCacheException.class,
                () -> HiCacheConfig.from(Settings.builder()
                        .flag("hicache-tiers", "device-only")
                        .flag("hicache-storage-backend", "memory")
                        .build()));
        assertTrue(refused.getMessage().contains("device-only"), refused.getMessage());
    }

    /**
     * Issue 23 (tests): a store failing a share of its calls and pages, and a busy CPU (a spinning thread per core):
     * no request fails that the pool could serve, every served byte is right (serve checks them), nothing stays
     * pinned, and closing is bounded. It found a wait of each other: the completion thread had taken a finished
     * backup's completion and waited for the lock an allocation held while it waited for that very copy (PAGES_EXHAUSTED
     * after 500 ms); the completion loop now hands over the completion it holds to a caller holding the lock.
     */
    @Test
    void aFaultyStoreAndABusyCpuFailNoRequest() throws Exception {
        InMemoryPageStore shared = new InMemoryPageStore(1L << 30);
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> busy = new ArrayList<>();
        for (int i = 0; i < Runtime.getRuntime().availableProcessors(); i++) {
            busy.add(Thread.ofPlatform().daemon().start(() -> {
                while (!stop.get()) {
                    Thread.onSpinWait();
                }
            }));
        }
        try {
            for (int engine = 0; engine < 2; engine++) {
                var faulty = new FaultyPageStore(unclosable(shared), 0.3, 0.1, 17 + engine);
                TestEngine e = new TestEngine(
                        settings("hicache-storage-prefetch-policy", "timeout", "hicache-close-timeout", "2s"),
                        16,
                        faulty);
                try {
                    for (int round = 0; round < 3; round++) {
                        for (int p = 0; p < 8; p++) {
                            // 15 pages each through a 16-page device: every prompt needs the last one's pages
                            e.serve("e" + engine + "-r" + round + "-p" + p, prompt(p * 1000, 60));
                        }
                    }
                    quiesceAndCheck(e);
                } finally {
                    closeWithin(e, 10_000);
                }
            }
        } finally {
            stop.set(true);
            for (Thread t : busy) {
                t.join();
            }
            shared.close();
        }
    }

    /**
     * Issue 23 (tests): a store slow on purpose (1 ms per call and 0.5 ms per page, about the file store at small
     * pages) under a multi-turn workload through a device pool of 16 pages: no request fails, every served byte is
     * right (serve checks them), nothing stays pinned, closing is bounded, and a second engine gets the
     * conversations from it.
     */
    @Test
    void aSlowStoreUnderAMultiTurnWorkloadFailsNoRequest() throws Exception {
        InMemoryPageStore shared = new InMemoryPageStore(1L << 30);
        try {
            List<int[]> turns = new ArrayList<>();
            int[][] conversations = new int[4][0];
            for (int round = 0; round < 3; round++) {
                for (int c = 0; c < conversations.length; c++) {
                    int[] more = prompt(100_000 * (c + 1) + 1000 * round, 16); // 4 pages more each turn
                    int[] turn = Arrays.copyOf(conversations[c], conversations[c].length + more.length);
                    System.arraycopy(more, 0, turn, conversations[c].length, more.length);
                    conversations[c] = turn;
                    turns.add(turn);
                }
            }
            long fromStore = 0;
            for (int engine = 0; engine < 2; engine++) {
                var slow = new SlowPageStore(unclosable(shared), 1_000, 500);
                TestEngine e = new TestEngine(
                        settings(
                                "hicache-storage-prefetch-policy",
                                "wait_complete",
                                "prefetch-threshold",
                                "4",
                                "hicache-close-timeout",
                                "5s"),
                        16,
                        slow);
                try {
                    for (int t = 0; t < turns.size(); t++) {
                        TestEngine.Served served = e.serve("e" + engine + "-t" + t, turns.get(t));
                        if (engine == 1) {
                            fromStore += served.outcome().storeTokens();
                        }
                    }
                    quiesceAndCheck(e);
                } finally {
                    closeWithin(e, 8_000);
                }
            }
            assertTrue(fromStore > 0, "the second engine got pages from the slow store");
        } finally {
            shared.close();
        }
    }

    /** Waits for background work, then checks that nothing is pinned and the cache is consistent. */
    static void quiesceAndCheck(TestEngine e) throws Exception {
        e.quiesce();
        assertTrue(e.cache.nothingPinned());
        e.cache.core().checkConsistency();
    }

    /** Closes {@code e}, failing if that took {@code maxMillis} or more. */
    static void closeWithin(TestEngine e, long maxMillis) throws Exception {
        long start = System.nanoTime();
        e.close();
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(millis < maxMillis, "close took " + millis + " ms");
    }

    /** Issue 23, item 6: closing over a stalled store is bounded by hicache-close-timeout, not 30 s per loop. */
    @Test
    void closingOverAStalledStoreIsBounded() throws Exception {
        TroubledPageStore l3 = new TroubledPageStore().stall();
        TestEngine e = new TestEngine(settings("hicache-close-timeout", "1s"), 64, l3);
        long closed;
        try {
            for (int i = 0; i < 4; i++) {
                e.serve("p" + i, prompt(i * 1000, 48)); // uploads queue behind the stalled store
            }
            e.quiesceCopies();
        } finally {
            long start = System.nanoTime();
            e.close();
            closed = (System.nanoTime() - start) / 1_000_000;
        }
        assertTrue(closed < 8_000, "close took " + closed + " ms with a close timeout of 1 s");
    }

    /** Issue 23, item 5: a failed upload is retried, so one bad call does not leave a hole in L3's prefixes. */
    @Test
    void aFailedUploadIsRetried() throws Exception {
        TroubledPageStore l3 = new TroubledPageStore().failNextPuts(3);
        try (TestEngine e = new TestEngine(settings(), 64, l3)) {
            List<int[]> prompts = List.of(prompt(0, 48), prompt(1000, 48), prompt(2000, 48));
            for (int i = 0; i < prompts.size(); i++) {
                e.serve("p" + i, prompts.get(i));
            }
            e.quiesce();
            for (int[] p : prompts) {
                assertTrue(l3.holdsAll(e.keys(p)), "every page of every prompt reached L3: " + e.cache.stats());
            }
            e.cache.core().checkConsistency();
        }
    }

    /**
     * Issue 23, uploads under a slow L3: the uploads of many small nodes queued behind a stalled store are written in
     * a few batches once it moves, so its per-call cost is paid per batch, not per node.
     */
    @Test
    void queuedUploadsOfManyNodesShareStoreCalls() throws Exception {
        TroubledPageStore l3 = new TroubledPageStore().stall();
        try (TestEngine e = new TestEngine(settings("hicache-storage-timeout", "20s"), 64, l3)) {
            List<int[]> prompts = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                prompts.add(prompt(i * 1000, 8)); // 2 pages each: 20 nodes of their own
                e.serve("p" + i, prompts.getLast());
                e.quiesceCopies();
            }
            long end = System.nanoTime() + 10_000_000_000L;
            while (e.cache.core().uploader.queuedPages() > 40 - 2 * 4 && System.nanoTime() < end) {
                Thread.sleep(1); // the upload threads (4) each take a node and wait for the store
            }
            l3.release();
            e.quiesce();
            for (int[] p : prompts) {
                assertTrue(l3.holdsAll(e.keys(p)), "every page reached L3: " + e.cache.stats());
            }
            assertTrue(l3.putCalls() <= 8, l3.putCalls() + " put calls for 20 nodes");
            e.cache.core().checkConsistency();
        }
    }

    /**
     * Issue 23, item 3: a write-through backup keeps its node locked until its completion is applied; with the
     * completion thread starved (here: it has taken the completion and waits for the lock this test holds), an
     * allocation the finished copy would make possible must not fail.
     */
    @Test
    void aFinishedCopyIsAppliedBeforeAnAllocationIsRefused() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 16, null)) {
            int[] p = prompt(0, 60); // 15 of the 16 device pages
            ReentrantLock lock = e.cache.core().lock;
            TestEngine.Served other;
            lock.lock();
            try {
                e.serve(
                        "first",
                        p); // write-through backs it up as it is committed; the copy finishes, its completion waits
                long end = System.nanoTime() + 10_000_000_000L;
                while (e.cache.core().completions.depth() == 0 && System.nanoTime() < end) {
                    Thread.sleep(1);
                }
                assertTrue(e.cache.core().completions.depth() > 0, "the backup's completion is queued");
                other = e.serve("other", prompt(10_000, 60)); // 15 pages: only the backed-up prefix can go
            } finally {
                lock.unlock();
            }
            assertEquals(15, other.computedPages());
            e.quiesce();
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency();
        }
    }

    /** The store, with close() doing nothing: shared by two engines in a test, closed by the test. */
    static PageStore unclosable(InMemoryPageStore store) {
        return FaultyPageStore.sharing(store);
    }
}
