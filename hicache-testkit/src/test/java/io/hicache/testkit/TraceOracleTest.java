package io.hicache.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Issue 40, part 3: the Mooncake conversation trace replayed through plain block-level LRU reproduces the hit rates
 * the trace's README gives (to 0.1 point), which proves the reader and the oracle the cache's own replays are
 * compared with.
 */
class TraceOracleTest {
    @Test
    void blockLruReproducesThePublishedHitRates() {
        Trace trace = Trace.mooncakeConversation();
        assertEquals(12_031, trace.requests().size());
        assertEquals(288_500, trace.blocks());
        Set<Integer> distinct = new HashSet<>();
        trace.requests().forEach(r -> {
            for (int b : r.blocks()) {
                distinct.add(b);
            }
        });
        assertEquals(182_790, distinct.size());
        long[] capacityTokens = {16L << 10, 64L << 10, 256L << 10, 1L << 20, 4L << 20, 16L << 20, Long.MAX_VALUE};
        double[] percent = {3.2, 4.1, 4.2, 5.5, 18.1, 33.5, 36.6};
        for (int i = 0; i < capacityTokens.length; i++) {
            BlockLru lru = new BlockLru(
                    capacityTokens[i] == Long.MAX_VALUE ? Long.MAX_VALUE : capacityTokens[i] / Trace.BLOCK_TOKENS);
            trace.requests().forEach(r -> lru.serve(r.blocks()));
            assertEquals(percent[i], Math.round(lru.hitRate() * 1000) / 10.0, 1e-9, "capacity " + capacityTokens[i]);
        }
    }

    @Test
    void tokensRepeatEqualBlocksAndNeverShareAToken() {
        Trace.Request a = new Trace.Request(0, 1000, 1, new int[] {7, 9});
        Trace.Request b = new Trace.Request(0, 600, 1, new int[] {7, 3});
        int[] ta = a.tokens();
        int[] tb = b.tokens();
        assertEquals(1000, ta.length);
        assertEquals(600, tb.length);
        assertArrayEquals(java.util.Arrays.copyOf(ta, 512), java.util.Arrays.copyOf(tb, 512), "block 7 alike");
        assertEquals(9 * 512, ta[512]);
        assertEquals(3 * 512, tb[512]);
        // a trace whose length is shorter than its blocks gives whole blocks
        assertEquals(1024, new Trace.Request(0, 100, 1, new int[] {1, 2}).tokens().length);
    }

    @Test
    void aLineThatIsNotARequestIsNamed() {
        String text =
                "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1]}\n{\"oops\": 1}\n";
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> Trace.read(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8))));
        assertEquals(true, e.getMessage().startsWith("line 2 "), e.getMessage());
    }
}
