package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.HiCacheTest.unclosable;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A page store that stops answering, replayed as outside checks found it: with {@code wait_complete}, every request
 * that started a prefetch used to wait the whole storage timeout (and 5 s more) on the one query thread, so requests
 * queued behind each other (200 turns took 345-465 s); under {@code timeout}, hung gets kept host pages claimed; and
 * closing left upload threads alive for a minute. Now a request waits at most its own calls' deadline and grace, the
 * store counts as not answering after the first such call, so later requests do not wait at all, and closing ends
 * every thread within its timeout.
 */
class HungStoreTest {
    private static final int TURNS = 200;
    private static final long STORAGE_TIMEOUT_MILLIS = 400;

    /** 40 conversations of 5 turns, each turn 12 pages (page 4) longer than the last, interleaved. */
    private static List<int[]> turns() {
        List<int[]> turns = new ArrayList<>();
        int[][] conversations = new int[40][0];
        for (int t = 0; turns.size() < TURNS; t++) {
            for (int c = 0; c < conversations.length && turns.size() < TURNS; c++) {
                int[] more = TestEngine.prompt(1_000_000 * (c + 1) + 1000 * t, 48);
                conversations[c] = TestEngine.concat(conversations[c], more);
                turns.add(conversations[c]);
            }
        }
        return turns;
    }

    private static Map<String, String> hungSettings(String policy, String... more) {
        Map<String, String> s = settings(
                "hicache-storage-prefetch-policy",
                policy,
                "hicache-storage-timeout",
                STORAGE_TIMEOUT_MILLIS + "ms",
                "prefetch-threshold",
                "8",
                "prefetch-timeout-base",
                "50ms",
                "hicache-write-policy",
                "write_through",
                "hicache-close-timeout",
                "2s");
        for (int i = 0; i < more.length; i += 2) {
            s.put(more[i], more[i + 1]);
        }
        return s;
    }

    /** The longest any request waited for its prefetch. */
    private static long replay(TestEngine e, List<int[]> turns) throws Exception {
        long longest = 0;
        for (int t = 0; t < turns.size(); t++) {
            TestEngine.Served served = e.serve("t" + t, turns.get(t));
            longest = Math.max(longest, served.outcome().prefetchWait().toMillis());
        }
        return longest;
    }

    @Test
    void aStoreThatStopsAnsweringCostsEachRequestAtMostItsOwnWait() throws Exception {
        HungPageStore store = new HungPageStore().hang(true, true, true, false); // answers only at each deadline
        List<int[]> turns = turns();
        try (TestEngine e = new TestEngine(hungSettings("wait_complete"), 256, store)) {
            long start = System.nanoTime();
            long longest = replay(e, turns);
            long seconds = (System.nanoTime() - start) / 1_000_000_000L;
            CacheStats s = e.cache.stats();
            System.out.println("hung store, wait_complete: " + TURNS + " turns in " + seconds + " s, longest prefetch "
                    + "wait " + longest + " ms; " + s);
            // Each request waits at most its own call's deadline and grace: a turn that waited for another's would
            // wait longer. Queued behind one thread, 200 turns took 200 waits.
            assertTrue(
                    longest <= STORAGE_TIMEOUT_MILLIS + TimedPageStore.GRACE.toMillis() + 500,
                    "a request waited " + longest + " ms for its prefetch; " + s);
            assertTrue(seconds < 60, TURNS + " turns took " + seconds + " s; " + s);
            long skipped = s.prefetchesSkipped().getOrDefault(PrefetchSkip.STORE_UNRESPONSIVE, 0L);
            assertTrue(skipped > TURNS / 2, "most turns should not even try: " + s.prefetchesSkipped());
            e.quiesce();
            assertTrue(e.cache.nothingPinned());
            e.cache.core().checkConsistency(true); // every host slot a hung call had is back
            assertEquals(
                    s.prefetchesStarted(),
                    s.prefetchesCompleted() + s.prefetchesRevoked() + s.prefetchesTimedOut() + s.prefetchesEmpty(),
                    "every prefetch's ending is counted: " + s);
        } finally {
            store.close();
        }
    }

    @Test
    void hungGetsUnderTheTimeoutPolicyDoNotTakeTheHostFromBackups() throws Exception {
        HungPageStore store = new HungPageStore();
        List<int[]> turns = turns();
        // A first engine fills the store, so that the second's queries find every page: it fetches them all.
        try (TestEngine filler = new TestEngine(hungSettings("timeout"), 256, unclosable(store.inner()))) {
            for (int t = turns.size() - 40; t < turns.size(); t++) { // each conversation's last turn
                filler.serve("fill" + t, turns.get(t));
            }
            filler.quiesce();
        }
        store.hang(false, true, false, false); // queries answer, gets answer only at their deadline
        try (TestEngine e = new TestEngine(hungSettings("timeout"), 128, store)) {
            long longest = replay(e, turns);
            CacheStats s = e.cache.stats();
            System.out.println("hung gets, timeout policy: longest prefetch wait " + longest + " ms; " + s);
            long timeoutPolicyBound = 50 + 2 * 12 * 4; // prefetch-timeout-base and a generous per-token share
            assertTrue(longest < timeoutPolicyBound + 500, "a request waited " + longest + " ms; " + s);
            assertTrue(s.failures().keySet().stream().noneMatch(k -> k.startsWith("backup")), "backups failed: " + s);
            assertEquals(0L, s.prefetchesSkipped().getOrDefault(PrefetchSkip.NO_HOST_ROOM, 0L), s.toString());
            assertTrue(s.prefetchesSkipped().getOrDefault(PrefetchSkip.STORE_UNRESPONSIVE, 0L) > 0, s.toString());
            e.quiesce();
            e.cache.core().checkConsistency(true);
            assertEquals(
                    s.prefetchesStarted(),
                    s.prefetchesCompleted() + s.prefetchesRevoked() + s.prefetchesTimedOut() + s.prefetchesEmpty(),
                    "every prefetch's ending is counted: " + s);
            assertTrue(s.prefetchesTimedOut() > 0, "the timeout policy ended prefetches: " + s);
        } finally {
            store.close();
        }
    }

    @Test
    void aStoreThatNeverAnswersLetsRequestsGoAndCloseEndsEveryThread() throws Exception {
        HungPageStore store = new HungPageStore().hang(true, true, true, true); // never answers anything
        List<int[]> turns = turns().subList(0, 60);
        TestEngine e = new TestEngine(hungSettings("wait_complete"), 256, store);
        long closeMillis;
        try {
            long longest = replay(e, turns);
            assertTrue(
                    longest <= STORAGE_TIMEOUT_MILLIS + TimedPageStore.GRACE.toMillis() + 500,
                    "a request waited " + longest + " ms for its prefetch");
            assertTrue(store.hangingNow() > 0, "the store never answered a call");
            e.quiesceCopies();
        } finally {
            long start = System.nanoTime();
            e.cache.close();
            closeMillis = (System.nanoTime() - start) / 1_000_000;
            e.close(); // the rest of the engine; the cache is closed already
        }
        assertTrue(closeMillis < 2_000 + 500, "close took " + closeMillis + " ms with a close timeout of 2 s");
        assertTrue(e.cache.core().threadsEnded(), "a thread of the cache outlived close()");
    }
}
