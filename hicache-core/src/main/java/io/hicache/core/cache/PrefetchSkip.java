package io.hicache.core.cache;

import java.util.Locale;

/**
 * Why a request's prefetch from the page store was not started (docs/embedding.md says when each applies). Counted
 * by reason in {@link CacheStats#prefetchesSkipped()} and the metric {@code hicache_cache_prefetches_skipped_total}
 * (label {@link #label()}).
 */
public enum PrefetchSkip {
    /** The deepest node matched is on the device only: prefetching past it would pin device memory (SGLang's rule). */
    ANCHOR_NOT_BACKED_UP,
    /** A running prefetch fetches these pages already: the request joined it (no new work, so not refused). */
    SHARED_WITH_RUNNING,
    /** Prefetches hold {@code 0.8 * (host pages - device pages)} host slots already (SGLang's rate limit). */
    RATE_LIMITED,
    /** Fetching at the store's measured speed would take longer than recomputing. */
    SLOWER_THAN_RECOMPUTE,
    /** Ranks that agree start a prefetch together or not at all, and another rank declined. */
    ANOTHER_RANK_DECLINED,
    /** The prefetch loop's queue is full. */
    QUEUE_FULL,
    /** The page store does not answer the calls a prefetch needs. */
    STORE_UNRESPONSIVE,
    /** The host has no room for the tail, even after evicting. */
    NO_HOST_ROOM;

    /** Its name in metrics and logs: {@code rate_limited}, ... */
    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }
}
