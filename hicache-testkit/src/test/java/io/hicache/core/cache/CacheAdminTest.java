package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.TestEngine.concat;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.testkit.SlowPageStore;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Issue 19, part 4: flush, detach and attach of the page store while requests run, and reset. */
class CacheAdminTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    @Test
    void aFlushDropsEveryUnpinnedPageAndKeepsWhatARequestHolds() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 64, null)) {
            int[] a = prompt(1000, 32);
            int[] b = prompt(2000, 32);
            e.serve("a", a);
            e.serve("b", b);
            e.quiesce();
            assertEquals(16, e.cache.stats().hostPages(), "write-through backed both prompts up");
            try (CacheRequest holding = e.cache.request("holding", a)) {
                assertEquals(32, holding.deviceTokens());
                CacheAdmin.Flushed flushed = e.cache.admin().flush(WAIT);
                assertEquals(8, flushed.devicePages(), "b's device pages went; a's are pinned");
                assertEquals(8, flushed.hostPages(), "b's host pages went; a's device node holds its backups");
                CacheStats s = e.cache.stats();
                assertEquals(8, s.devicePages(), s::toString);
                e.cache.core().checkConsistency(false);
            }
            TestEngine.Served again = e.serve("b-again", b);
            assertEquals(0, again.deviceTokens() + again.hostTokens(), "b is gone from every tier");
            assertEquals(32, e.serve("a-again", a).deviceTokens(), "a stayed");
            e.quiesce();
            CacheAdmin.Flushed all = e.cache.admin().flush(WAIT);
            assertEquals(16, all.devicePages());
            assertEquals(16, all.hostPages());
            assertEquals(0, e.cache.stats().devicePages());
            assertEquals(0, e.cache.stats().hostPages());
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency();
        }
    }

    /**
     * The store is detached and another attached while a thread serves a stream of multi-turn conversations: no request
     * fails, every served byte is right (serve checks them), uploads queued before the detach reach the first store,
     * pages cached after the attach reach the second, and the second serves a prefetch after a flush.
     */
    @Test
    void theStoreIsSwappedUnderLoadAndNoRequestFails() throws Exception {
        InMemoryPageStore first = new InMemoryPageStore(1L << 30);
        InMemoryPageStore second = new InMemoryPageStore(1L << 30);
        PageStore slowFirst = new SlowPageStore(first, 2_000, 1_000); // calls take 1-2 ms: uploads overlap the swap
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        AtomicBoolean serving = new AtomicBoolean(true);
        AtomicInteger served = new AtomicInteger();
        try (TestEngine e = new TestEngine(
                settings("hicache-storage-prefetch-policy", "wait_complete", "prefetch-threshold", "4"),
                32,
                slowFirst)) {
            Thread load = Thread.ofPlatform().name("serving").start(() -> {
                int[][] conversations = new int[3][0];
                try {
                    for (int turn = 0; serving.get() || turn < 6; turn++) {
                        int c = turn % conversations.length;
                        conversations[c] = concat(conversations[c], prompt(1_000_000 * (c + 1) + 100 * turn, 16));
                        if (conversations[c].length > 96) {
                            conversations[c] = prompt(1_000_000 * (c + 1) + 100 * turn, 16); // a new conversation
                        }
                        e.serve("t" + turn, conversations[c]);
                        served.incrementAndGet();
                    }
                } catch (Throwable t) {
                    failures.add(t);
                }
            });
            awaitServed(served, 10);
            PageStore detached = e.cache.admin().detachStore(WAIT).orElseThrow();
            assertSame(slowFirst, detached, "the store comes back as it was given");
            assertFalse(e.cache.admin().storeAttached());
            long inFirst = first.stats().storedPages();
            assertTrue(inFirst > 0, "uploads before the detach reached the first store");
            int at = served.get();
            awaitServed(served, at + 6);
            assertEquals(inFirst, first.stats().storedPages(), "nothing reaches a detached store");
            assertTrue(e.cache.admin().detachStore(WAIT).isEmpty(), "nothing left to detach");
            e.cache.admin().attachStore(second);
            assertThrows(IllegalStateException.class, () -> e.cache.admin().attachStore(first));
            at = served.get();
            awaitServed(served, at + 10);
            serving.set(false);
            load.join(30_000);
            assertFalse(load.isAlive(), "the serving thread ended");
            assertEquals(List.of(), failures, "no request failed");
            e.quiesce();
            assertTrue(second.stats().storedPages() > 0, "pages cached after the attach reached the second store");

            // The second store serves a prompt cached after the attach, once the cache has forgotten it.
            int[] known = prompt(9_000_000, 32);
            e.serve("known", known);
            e.quiesce();
            assertEquals(
                    8, second.leadingHits(e.keys(known), Deadline.after(WAIT)).get(), "uploaded to the second");
            e.cache.admin().flush(WAIT);
            TestEngine.Served back = e.serve("back", known);
            assertTrue(back.outcome().storeTokens() > 0, "the attached store served a prefetch: " + back);
            e.quiesce();
            e.cache.core().checkConsistency();
        } finally {
            slowFirst.close(); // detached, so the test's to close (and with it the store behind)
        }
    }

    @Test
    void aResetEmptiesEveryTierAndTheNamespaceInTheStore() throws Exception {
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        try (TestEngine e = new TestEngine(
                settings("hicache-storage-prefetch-policy", "wait_complete"), 64, HiCacheTest.unclosable(store))) {
            int[] p = prompt(4242, 64);
            e.serve("a", p);
            e.quiesce();
            assertEquals(16, store.stats().storedPages());
            try (CacheRequest open = e.cache.request("open", p)) {
                assertEquals(64, open.deviceTokens());
                assertThrows(IllegalStateException.class, () -> e.cache.admin().reset(WAIT), "pages are pinned");
            }
            CacheAdmin.Flushed flushed = e.cache.admin().reset(WAIT);
            assertEquals(16, flushed.devicePages());
            assertEquals(0, store.stats().storedPages(), "the namespace left the store");
            TestEngine.Served again = e.serve("again", p);
            assertEquals(16, again.computedPages(), "nothing of it was left anywhere");
            e.quiesce();
            e.cache.core().checkConsistency();
        } finally {
            store.close();
        }
    }

    private static void awaitServed(AtomicInteger served, int atLeast) throws InterruptedException {
        long end = System.nanoTime() + WAIT.toNanos();
        while (served.get() < atLeast) {
            if (System.nanoTime() > end) {
                throw new AssertionError("the serving thread got to " + served.get() + " requests, not " + atLeast);
            }
            Thread.sleep(5);
        }
    }
}
