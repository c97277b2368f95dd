package io.hicache.testkit;

import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.util.Checks;
import java.time.Duration;
import java.util.Arrays;

/**
 * Replays a {@link Trace} through a {@link HiCache} as an engine would serve it, prompt by prompt: request, wait for
 * the prefetch (as its policy says), load back, reuse the cached prefix, allocate and commit the rest. Counts, as
 * {@link BlockLru} does, each request's blocks served from the cache up to its first miss: a block is a hit when the
 * reused prefix covers it whole. The engine computes no KV (the pages' bytes are whatever the pool holds): only
 * where pages are found is measured. Not thread-safe; one replay at a time on one cache.
 */
public final class TraceReplay {
    private long lookedUp;
    private long hits;
    private long requests;

    /** Replays every request of {@code trace} on {@code cache}, whose page size must divide the trace's blocks. */
    public TraceReplay run(HiCache cache, Trace trace) throws InterruptedException {
        int page = cache.config().pageSizeTokens();
        Checks.requireArgument(
                Trace.BLOCK_TOKENS % page == 0, "the page size (%s) must divide the trace's blocks (512)", page);
        for (Trace.Request r : trace.requests()) {
            serve(cache, "r" + requests, r.tokens(), r.blocks().length);
            requests++;
        }
        return this;
    }

    private void serve(HiCache cache, String id, int[] tokens, int blocks) throws InterruptedException {
        int page = cache.config().pageSizeTokens();
        try (CacheRequest r = cache.request(id, tokens)) {
            long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!r.tryEndPrefetch()) {
                Checks.requireState(System.nanoTime() < until, "a prefetch of request %s never ended", id);
                Thread.sleep(0, 200_000);
            }
            CacheRequest.LoadBack lb = r.loadBack(Integer.MAX_VALUE);
            Checks.requireState(lb.await(Duration.ofSeconds(30)), "a load-back of request %s never ended", id);
            int[] prefix = r.prefixPages();
            int whole = tokens.length / page;
            lookedUp += blocks;
            hits += Math.min(blocks, (long) prefix.length * page / Trace.BLOCK_TOKENS);
            if (whole > cache.room().devicePages()) {
                return; // no engine could hold this prompt's KV on this device: served, not cached
            }
            int[] fresh = r.allocate(whole - prefix.length);
            int[] all = Arrays.copyOf(prefix, whole);
            System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
            r.commit(Arrays.copyOf(tokens, whole * page), all, true);
        }
    }

    /** Blocks hit over blocks looked up. */
    public double hitRate() {
        return lookedUp == 0 ? 0 : hits / (double) lookedUp;
    }

    /** Blocks looked up. */
    public long lookedUp() {
        return lookedUp;
    }

    /** Blocks hit. */
    public long hits() {
        return hits;
    }
}
