package io.hicache.core.cache;

import java.time.Duration;

/**
 * Where one request's prompt came from, so that an engine (and a benchmark) can account exactly: tokens found on the
 * device (L1), loaded back from the host (L2), fetched from the page store (L3, then loaded), and computed by the
 * engine; what the prefetch did; and how long the request waited for it.
 *
 * @param deviceTokens   prompt tokens on the device when the request started
 * @param hostTokens     tokens loaded back from pages the host already had
 * @param storeTokens    tokens loaded back from pages the prefetch fetched from the page store
 * @param computedTokens tokens in the pages the engine allocated for its own KV (whole pages)
 * @param prefetch       what its prefetch from the page store did
 * @param prefetchWait   from the request's start until {@link CacheRequest#tryEndPrefetch()} first answered true
 */
public record RequestOutcome(
        int deviceTokens,
        int hostTokens,
        int storeTokens,
        int computedTokens,
        PrefetchOutcome prefetch,
        Duration prefetchWait) {}
