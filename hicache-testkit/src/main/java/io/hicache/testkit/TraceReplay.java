package io.hicache.testkit;

import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.Retention;
import io.hicache.core.util.Checks;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.Arrays;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;

/**
 * Replays a {@link Trace} through a {@link HiCache} as an engine would serve it, prompt by prompt: request, wait for
 * the prefetch (as its policy says), load back, reuse the cached prefix, allocate and commit the rest. Counts, as
 * {@link BlockLru} does, each request's blocks served from the cache up to its first miss: a block is a hit when the
 * reused prefix covers it whole. The engine computes no KV (the pages' bytes are whatever the pool holds): only
 * where pages are found is measured.
 *
 * <p>A subset of the requests may be {@link #tag tagged}: they are counted apart from the rest, and made with a
 * {@link Retention} (issue 42). The replay keeps the trace's time in {@link #clock()}, which moves to each request's
 * timestamp before it is made: open the cache with it ({@code HiCache.builder().clock(replay.clock())}) so that
 * retention decays as it would have over the trace's hour, however fast the replay runs.
 *
 * <p>Not thread-safe; one replay at a time on one cache.
 */
public final class TraceReplay {
    private final Counts tagged = new Counts();
    private final Counts rest = new Counts();
    private long requests;
    private @Nullable Predicate<Trace.Request> tag;
    private Retention tagRetention = Retention.NONE;
    /** The trace's time, in milliseconds from its start: the timestamp of the request being served. */
    private volatile long traceMillis;

    private static final class Counts {
        long lookedUp;
        long hits;

        double rate() {
            return lookedUp == 0 ? 0 : hits / (double) lookedUp;
        }
    }

    /**
     * Tags the requests {@code which} selects: they are made with {@code retention} (the others with none) and
     * counted apart ({@link #taggedHitRate}, {@link #untaggedHitRate}). {@link Retention#NONE} counts them apart
     * only: the same replay without priorities. Set at most once, before {@link #run}.
     */
    public TraceReplay tag(Predicate<Trace.Request> which, Retention retention) {
        Checks.requireState(tag == null, "the tagged requests were already chosen");
        tag = Checks.checkNotNull(which, "which");
        tagRetention = Checks.checkNotNull(retention, "retention");
        return this;
    }

    /** The trace's time (from the epoch at the trace's start), at the timestamp of the request being served. */
    public InstantSource clock() {
        return new InstantSource() {
            @Override
            public long millis() {
                return traceMillis;
            }

            @Override
            public Instant instant() {
                return Instant.ofEpochMilli(traceMillis);
            }
        };
    }

    /** Replays every request of {@code trace} on {@code cache}, whose page size must divide the trace's blocks. */
    public TraceReplay run(HiCache cache, Trace trace) throws InterruptedException {
        int page = cache.config().pageSizeTokens();
        Checks.requireArgument(
                Trace.BLOCK_TOKENS % page == 0, "the page size (%s) must divide the trace's blocks (512)", page);
        for (Trace.Request r : trace.requests()) {
            traceMillis = Math.max(traceMillis, r.timestampMillis());
            boolean tagged = tag != null && tag.test(r);
            serve(cache, "r" + requests, r.tokens(), r.blocks().length, tagged);
            requests++;
        }
        return this;
    }

    private void serve(HiCache cache, String id, int[] tokens, int blocks, boolean isTagged)
            throws InterruptedException {
        int page = cache.config().pageSizeTokens();
        Counts counts = isTagged ? tagged : rest;
        try (CacheRequest r = cache.request(id, "", tokens, isTagged ? tagRetention : Retention.NONE)) {
            long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!r.tryEndPrefetch()) {
                Checks.requireState(System.nanoTime() < until, "a prefetch of request %s never ended", id);
                Thread.sleep(0, 200_000);
            }
            CacheRequest.LoadBack lb = r.loadBack(Integer.MAX_VALUE);
            Checks.requireState(lb.await(Duration.ofSeconds(30)), "a load-back of request %s never ended", id);
            int[] prefix = r.prefixPages();
            int whole = tokens.length / page;
            counts.lookedUp += blocks;
            counts.hits += Math.min(blocks, (long) prefix.length * page / Trace.BLOCK_TOKENS);
            if (whole > cache.room().devicePages()) {
                return; // no engine could hold this prompt's KV on this device: served, not cached
            }
            int[] fresh = r.allocate(whole - prefix.length);
            int[] all = Arrays.copyOf(prefix, whole);
            System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
            r.commit(Arrays.copyOf(tokens, whole * page), all, true);
        }
    }

    /** Blocks hit over blocks looked up, over every request. */
    public double hitRate() {
        long lookedUp = lookedUp();
        return lookedUp == 0 ? 0 : hits() / (double) lookedUp;
    }

    /** Blocks looked up, over every request. */
    public long lookedUp() {
        return tagged.lookedUp + rest.lookedUp;
    }

    /** Blocks hit, over every request. */
    public long hits() {
        return tagged.hits + rest.hits;
    }

    /** The hit rate of the tagged requests (0 when none is tagged). */
    public double taggedHitRate() {
        return tagged.rate();
    }

    /** The hit rate of the requests not tagged. */
    public double untaggedHitRate() {
        return rest.rate();
    }

    /** Blocks the tagged requests looked up. */
    public long taggedLookedUp() {
        return tagged.lookedUp;
    }
}
