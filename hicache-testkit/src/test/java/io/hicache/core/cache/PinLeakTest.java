package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Issue 40, part 4: requests that end early (after the match, after a load-back, after allocating, aborted) leave
 * no pin and no page behind, however many there are (vLLM #35931's leaked locks; SGLang #32455's pins that only
 * eviction released), and a read-only workload keeps being served from the cache without eviction pressure.
 */
class PinLeakTest {
    @Test
    void requestsThatEndEarlyLeaveNothingHeldAndReadsKeepBeingServed() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 64, null)) {
            int[][] prompts = new int[6][];
            for (int i = 0; i < prompts.length; i++) {
                prompts[i] = prompt(10_000 * (i + 1), 32); // 8 pages each: 48 of the 64 device pages
                e.serve("warm" + i, prompts[i]);
            }
            e.quiesce();
            HiCache.Room before = e.cache.room();
            Random r = new Random(40);
            for (int i = 0; i < 500; i++) {
                int[] p = prompts[r.nextInt(prompts.length)];
                CacheRequest req = e.cache.request("partial" + i, p);
                switch (r.nextInt(4)) {
                    case 0 -> {} // matched only
                    case 1 -> assertTrue(req.loadBack(Integer.MAX_VALUE).await(Duration.ofSeconds(10)));
                    case 2 -> req.allocate(2); // pages taken, never committed
                    default -> {
                        req.prefixPages();
                        req.abort();
                    }
                }
                req.close();
            }
            e.quiesce();
            assertTrue(e.cache.nothingPinned(), "no request left a pin");
            HiCache.Room after = e.cache.room();
            assertEquals(before.deviceFreePages(), after.deviceFreePages(), "no device page leaked");
            assertEquals(before.deviceEvictablePages(), after.deviceEvictablePages(), "every cached page evictable");
            assertEquals(before.hostFreePages(), after.hostFreePages(), "no host slot leaked");
            // read-only: the same prompts again and again are served from the device, nothing evicted to make room
            long evictedBefore = e.cache.stats().deviceEvictedPages();
            for (int i = 0; i < 200; i++) {
                assertEquals(
                        32, e.serve("read" + i, prompts[i % prompts.length]).deviceTokens());
            }
            assertEquals(evictedBefore, e.cache.stats().deviceEvictedPages(), "no eviction pressure from reads");
            e.cache.core().checkConsistency();
        }
    }
}
