package io.hicache.core.cache;

import static io.hicache.core.cache.TinyCache.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.hicache.core.rank.RankGroup;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Tensor-parallel ranks whose clocks disagree still evict the same (issue 42): retention is measured on a time the
 * ranks agree on at each settle, the least any rank's clock has moved, so a class that has decayed by one rank's clock
 * and not by another's holds on both.
 */
class RetentionRanksTest {
    @Test
    void ranksWhoseClocksDisagreeEvictTheSame() throws Exception {
        // rank 1's clock runs 2 s ahead: by it, the class of the first prompt has decayed when the pool fills
        List<String> said =
                TinyCache.onRanks("retention-ranks", 2, g -> serve(g, Duration.ofSeconds(g.rank() == 0 ? 59 : 61)));
        assertEquals("time 59000, retained 8, other 0", said.get(0), "rank 0's clock, the least moved, is the time");
        assertEquals(said.get(0), said.get(1), "both ranks evicted the same");
    }

    private static String serve(RankGroup group, Duration idle) throws Exception {
        try (TinyCache t = TinyCache.deviceOnly(8, group)) {
            int[] a = prompt(100, 2);
            int[] b = prompt(200, 2);
            t.serve(a, Retention.of(50, Duration.ofSeconds(60)));
            t.serve(b);
            t.serve(prompt(300, 2));
            t.clock.advance(idle);
            t.serve(prompt(400, 4)); // 2 pages must go: a's class holds until 60 s
            String said =
                    "time " + t.cache.core().tree.time() + ", retained " + t.onDevice(a) + ", other " + t.onDevice(b);
            t.cache.awaitIdle(Duration.ofSeconds(10)); // a collective: both ranks call it
            return said;
        }
    }
}
