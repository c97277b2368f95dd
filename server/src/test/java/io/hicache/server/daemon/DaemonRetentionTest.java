package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The daemon's retention (RETAIN, docs/protocol.md §3) against a reference policy: after every put that evicts, no
 * page that went ranks above one that stayed, where a page's rank is (demoted last of all, then its effective priority,
 * then its last use), its last use following the protocol's rules (a put, a read, a RETAIN last page first, a
 * demotion). Then: a priority lapses once its retention passed without a use; a chain is evicted from its end, never
 * leaving a hole in its prefix.
 */
class DaemonRetentionTest {
    private static final int PAGE = 64 * 1024;
    private static final Map<String, String> SMALL_SLAB = Map.of(
            "server.store", "none",
            "server.host-size", "4MiB",
            "server.max-page-bytes", "64KiB",
            "server.min-block-bytes", "64KiB");
    private static final Duration HOUR = Duration.ofHours(1);

    /** What the reference policy knows of a page. */
    private static final class Model {
        int priority;
        boolean demoted;
        long lastUse;
        final List<String> history = new ArrayList<>();

        /** Lower goes first: demoted pages, then by effective priority, then least recently used. */
        long[] rank() {
            return new long[] {demoted ? -1 : priority, lastUse};
        }
    }

    private static final Comparator<long[]> BY_RANK =
            Comparator.<long[]>comparingLong(r -> r[0]).thenComparingLong(r -> r[1]);

    private static void awaitEvictable(TestDaemon d) throws InterruptedException {
        long until = System.nanoTime() + 10_000_000_000L;
        while (d.server.pendingWriteBehindPages() > 0 && System.nanoTime() < until) {
            Thread.sleep(1);
        }
    }

    /** What the daemon knew of the pages that stayed though ranked below one that went: for a failure's message. */
    private static String why(TestDaemon d, List<StoreKey> stayed, Map<StoreKey, Model> present, long[] gone) {
        StringBuilder b = new StringBuilder();
        for (StoreKey k : stayed) {
            if (BY_RANK.compare(present.get(k).rank(), gone) < 0) {
                SlabPage p = d.server.cache.pages.peek(k);
                b.append("; ")
                        .append(k.hash().toHex().substring(0, 8))
                        .append(java.util.Arrays.toString(present.get(k).rank()));
                if (p != null) {
                    b.append(" daemon: priority ")
                            .append(p.priority)
                            .append(" demoted ")
                            .append(p.demoted)
                            .append(" pins ")
                            .append(p.pins.get())
                            .append(" dirty ")
                            .append(p.dirty);
                }
            }
        }
        return b.toString();
    }

    private static void awaitUnpinned(TestDaemon d, StoreKey k) throws InterruptedException {
        long until = System.nanoTime() + 10_000_000_000L;
        SlabPage p;
        while ((p = d.server.cache.pages.peek(k)) != null && p.pins.get() > 0 && System.nanoTime() < until) {
            Thread.sleep(1);
        }
    }

    private static boolean held(RemotePageStore c, StoreKey k) throws Exception {
        return c.prefixHits(List.of(k), Pages.deadline())
                        .get(10, TimeUnit.SECONDS)
                        .slab()
                == 1;
    }

    @Test
    void evictionTakesTheLowestEffectivePriorityFirstThenTheLeastRecentlyUsed() throws Exception {
        try (TestDaemon d = TestDaemon.start(SMALL_SLAB);
                Pages pages = new Pages();
                RemotePageStore c = d.client()) {
            Namespace ns = Pages.namespace("retention");
            SplittableRandom random = new SplittableRandom(20261127);
            Map<StoreKey, Model> present = new HashMap<>();
            long clock = 0;
            int evictions = 0;
            int[] priorities = {0, 20, 50, 90};
            for (int step = 0; step < 700; step++) {
                int op = random.nextInt(100);
                List<StoreKey> keys = new ArrayList<>(present.keySet());
                keys.sort(Comparator.comparing(StoreKey::toString)); // a seed gives one run
                if (op < 50 || keys.size() < 4) {
                    StoreKey k = pages.keys(ns, 1).getFirst();
                    BatchResult put = Pages.put(c, pages.filled(List.of(k), PAGE));
                    assertEquals(PageStatus.OK, put.status(0), "step " + step);
                    // Without L3 a page becomes evictable once the write-behind gave it up, a moment after its put;
                    // the reference policy ranks evictable pages, so the test waits for that (a loaded machine lags).
                    awaitEvictable(d);
                    List<StoreKey> gone = new ArrayList<>();
                    List<StoreKey> stayed = new ArrayList<>();
                    for (StoreKey p : keys) {
                        (held(c, p) ? stayed : gone).add(p);
                    }
                    if (!gone.isEmpty()) {
                        evictions++;
                        long[] highestGone = gone.stream()
                                .map(p -> present.get(p).rank())
                                .max(BY_RANK)
                                .orElseThrow();
                        long[] lowestKept = stayed.stream()
                                .map(p -> present.get(p).rank())
                                .min(BY_RANK)
                                .orElse(null);
                        assertTrue(
                                lowestKept == null || BY_RANK.compare(highestGone, lowestKept) < 0,
                                "step " + step + ": gone "
                                        + gone.stream()
                                                .map(g -> g.hash().toHex().substring(0, 8) + present.get(g).history)
                                                .toList()
                                        + " a page of rank " + java.util.Arrays.toString(highestGone)
                                        + " went while one of rank " + java.util.Arrays.toString(lowestKept)
                                        + " stayed" + why(d, stayed, present, highestGone));
                        gone.forEach(present::remove);
                    }
                    Model m = new Model();
                    m.lastUse = clock++;
                    present.put(k, m);
                } else if (op < 70) {
                    StoreKey k = keys.get(random.nextInt(keys.size()));
                    BatchResult got = Pages.get(c, pages.empty(List.of(k), PAGE));
                    assertEquals(PageStatus.OK, got.status(0), "step " + step);
                    // A page stays pinned until the socket took its bytes, which may be a moment after the client has
                    // them; a pinned page is not evictable, and the reference policy ranks evictable pages.
                    awaitUnpinned(d, k);
                    Model m = present.get(k);
                    m.lastUse = clock++;
                    m.demoted = false;
                    m.history.add("get@" + m.lastUse);
                } else if (op < 90) {
                    int n = 1 + random.nextInt(3);
                    List<StoreKey> chain = new ArrayList<>();
                    for (int i = 0; i < n; i++) {
                        chain.add(keys.get(random.nextInt(keys.size())));
                    }
                    chain = chain.stream().distinct().toList();
                    int priority = priorities[random.nextInt(priorities.length)];
                    BatchResult r =
                            c.retain(chain, priority, HOUR, Pages.deadline()).get(10, TimeUnit.SECONDS);
                    for (int i = chain.size() - 1; i >= 0; i--) { // last page first
                        assertEquals(PageStatus.OK, r.status(i));
                        Model m = present.get(chain.get(i));
                        m.priority = Math.max(m.demoted ? 0 : m.priority, priority);
                        m.demoted = false;
                        m.lastUse = clock++;
                        m.history.add("retain" + priority + "@" + m.lastUse);
                    }
                } else {
                    StoreKey k = keys.get(random.nextInt(keys.size()));
                    BatchResult r = c.demote(List.of(k), Pages.deadline()).get(10, TimeUnit.SECONDS);
                    assertEquals(PageStatus.OK, r.status(0));
                    Model m = present.get(k);
                    m.priority = 0;
                    m.demoted = true;
                    m.lastUse = clock++;
                    m.history.add("demote@" + m.lastUse);
                }
            }
            assertTrue(evictions > 100, "the run evicted " + evictions + " times: too few to say anything");
        }
    }

    @Test
    void aPriorityLapsesWhenItsRetentionPassesWithoutAUseAndAHitRenewsIt() throws Exception {
        try (TestDaemon d = TestDaemon.start(SMALL_SLAB);
                Pages pages = new Pages();
                RemotePageStore c = d.client()) {
            Namespace ns = Pages.namespace("lapse");
            List<StoreKey> held = pages.keys(ns, 3);
            Pages.put(c, pages.filled(held, PAGE));
            c.retain(held.subList(0, 1), 90, Duration.ofHours(1), Pages.deadline())
                    .get(10, TimeUnit.SECONDS);
            c.retain(held.subList(1, 3), 90, Duration.ofMillis(600), Pages.deadline())
                    .get(10, TimeUnit.SECONDS);
            for (int i = 0; i < 80; i++) { // 5 MiB through a 4 MiB slab: every page of priority 0 went
                Pages.put(c, pages.filled(pages.keys(ns, 1), PAGE));
            }
            assertTrue(held(c, held.get(0)) && held(c, held.get(1)) && held(c, held.get(2)), "kept while it holds");
            for (int i = 0; i < 4; i++) { // the third page is read every 250 ms: its 600 ms start again each time
                Thread.sleep(250);
                assertEquals(
                        PageStatus.OK,
                        Pages.get(c, pages.empty(held.subList(2, 3), PAGE)).status(0));
                awaitUnpinned(d, held.get(2));
            }
            for (int i = 0; i < 80; i++) {
                Pages.put(c, pages.filled(pages.keys(ns, 1), PAGE));
            }
            assertTrue(held(c, held.get(0)), "retention of an hour: kept");
            assertTrue(!held(c, held.get(1)), "retention of 600 ms, unused for a second: evicted as any other page");
            assertTrue(held(c, held.get(2)), "read within each 600 ms: kept");
        }
    }

    @Test
    void aChainGoesFromItsEndNeverLeavingAHoleInItsPrefix() throws Exception {
        try (TestDaemon d = TestDaemon.start(SMALL_SLAB);
                Pages pages = new Pages();
                RemotePageStore c = d.client()) {
            Namespace ns = Pages.namespace("chain");
            List<StoreKey> prefix = pages.keys(ns, 6);
            List<StoreKey> suffix = pages.keys(ns, 6);
            Pages.put(c, pages.filled(prefix, PAGE));
            Pages.put(c, pages.filled(suffix, PAGE)); // a later put of the chain's continuation
            List<StoreKey> chain = new ArrayList<>(prefix);
            chain.addAll(suffix);
            // The engine passes the prefix's keys with the continuation (SGLang's prefix keys): one RETAIN of it all.
            c.retain(chain, 0, Duration.ZERO, Pages.deadline()).get(10, TimeUnit.SECONDS);
            int before = 12;
            for (int step = 0; step < 200 && before > 0; step++) {
                Pages.put(c, pages.filled(pages.keys(ns, 1), PAGE));
                int run = c.prefixHits(chain, Pages.deadline())
                        .get(10, TimeUnit.SECONDS)
                        .slab();
                int count = 0;
                for (StoreKey k : chain) {
                    count += held(c, k) ? 1 : 0;
                }
                assertEquals(run, count, "the slab holds " + count + " of the chain's pages but a run of " + run);
                assertTrue(run <= before);
                before = run;
            }
            assertEquals(0, before, "the chain was evicted whole, from its end");
        }
    }
}
