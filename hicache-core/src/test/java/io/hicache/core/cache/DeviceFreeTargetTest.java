package io.hicache.core.cache;

import static io.hicache.core.cache.TinyCache.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.rank.RankGroup;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code hicache-device-free-target} (issue 44): part of the device pool is kept free ahead of need by demoting
 * device pages the host also holds, so a load-back takes free pages; pages the host does not hold are never dropped
 * for it, and ranks that agree free the same pages at the same point.
 */
class DeviceFreeTargetTest {
    private static final int POOL = 16;

    @Test
    void theEvictorLoopKeepsTheTargetFreeByDemotingBackedUpPages() throws Exception {
        try (TinyCache t = TinyCache.withHost(POOL, null, "hicache-device-free-target", "0.25")) {
            int[][] prompts = {prompt(100, 4), prompt(200, 4), prompt(300, 4), prompt(400, 4)};
            for (int[] p : prompts) {
                t.serve(p);
            }
            t.settle(); // the backups are applied: their pages may be demoted
            int free = awaitFree(t, 4);
            assertTrue(free >= 4, "a quarter of the pool is free ahead of need, " + free + " pages are");
            int onDevice = 0;
            for (int[] p : prompts) {
                assertEquals(p.length, t.onHost(p), "every prompt stays cached on the host");
                onDevice += t.onDevice(p);
            }
            assertEquals((POOL - free) * TinyCache.PAGE, onDevice, "what left the device was demoted, not dropped");
            assertEquals(0, t.onDevice(prompts[0]), "the least recently used prompt went first");
            assertEquals(prompts[0].length, t.serve(prompts[0]), "a demoted prompt is loaded back whole");
            t.settle();
        }
    }

    @Test
    void withoutTheTargetTheFullPoolStaysCached() throws Exception {
        try (TinyCache t = TinyCache.withHost(POOL, null)) {
            for (int base = 100; base <= 400; base += 100) {
                t.serve(prompt(base, 4));
            }
            t.settle();
            Thread.sleep(50);
            assertEquals(0, t.cache.core().pageAllocator.available(), "nothing is evicted before it must be");
        }
    }

    @Test
    void pagesTheHostDoesNotHoldAreNotDroppedAheadOfNeed() throws Exception {
        // write-back: nothing is backed up before eviction, so nothing can be demoted ahead of need
        try (TinyCache t = TinyCache.withHost(
                POOL, null, "hicache-device-free-target", "0.25", "hicache-write-policy", "write_back")) {
            int[][] prompts = {prompt(100, 4), prompt(200, 4), prompt(300, 4), prompt(400, 4)};
            for (int[] p : prompts) {
                t.serve(p);
            }
            t.settle();
            Thread.sleep(50);
            assertEquals(0, t.cache.core().pageAllocator.available(), "no page was freed");
            for (int[] p : prompts) {
                assertEquals(p.length, t.onDevice(p), "every prompt is still on the device");
            }
        }
    }

    @Test
    void ranksThatAgreeFreeTheSamePagesAtTheirSettles() throws Exception {
        List<String> said = TinyCache.onRanks("device-free-target", 2, DeviceFreeTargetTest::serveAsRank);
        String rank0 = said.get(0);
        int free = Integer.parseInt(rank0.substring("free ".length(), rank0.indexOf(',')));
        assertTrue(free >= 4, "the target is kept at a settle: " + rank0);
        assertEquals(rank0, said.get(1), "both ranks demoted the same pages");
    }

    private static String serveAsRank(RankGroup group) throws Exception {
        try (TinyCache t = TinyCache.withHostAsRank(POOL, group, "hicache-device-free-target", "0.25")) {
            int[][] prompts = {prompt(100, 4), prompt(200, 4), prompt(300, 4), prompt(400, 4)};
            for (int[] p : prompts) {
                t.serve(p);
            }
            t.cache.awaitIdle(Duration.ofSeconds(10)); // a collective: the backups are applied on both
            t.serve(prompt(500, 1)); // its request settles: both ranks free ahead here
            StringBuilder s =
                    new StringBuilder("free " + t.cache.core().pageAllocator.available() + ", on device");
            for (int[] p : prompts) {
                s.append(' ').append(t.onDevice(p));
            }
            t.cache.awaitIdle(Duration.ofSeconds(10));
            return s.toString();
        }
    }

    /** Free device pages once they reach {@code wanted} (the evictor loop runs in the background), or after 5 s. */
    private static int awaitFree(TinyCache t, int wanted) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        int free;
        while ((free = availableLocked(t)) < wanted && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        return free;
    }

    private static int availableLocked(TinyCache t) {
        CacheCore core = t.cache.core();
        core.lock.lock();
        try {
            return core.pageAllocator.available();
        } finally {
            core.lock.unlock();
        }
    }
}
