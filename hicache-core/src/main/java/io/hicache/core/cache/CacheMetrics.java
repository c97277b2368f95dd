package io.hicache.core.cache;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * The cache's counters: tokens served by tier, evictions, backups, uploads, prefetches, bytes moved each way, and
 * failures by cause. Thread-safe and lock-free; {@link #snapshot} reads them all with the queue depths.
 */
final class CacheMetrics {
    final LongAdder promptTokens = new LongAdder();
    final LongAdder deviceHitTokens = new LongAdder();
    final LongAdder hostHitTokens = new LongAdder();
    final LongAdder storageHitTokens = new LongAdder();
    final LongAdder computedTokens = new LongAdder();
    final LongAdder deviceEvictedPages = new LongAdder();
    final LongAdder deviceDeletedPages = new LongAdder();
    final LongAdder hostEvictedPages = new LongAdder();
    final LongAdder corruptHostPages = new LongAdder();
    final LongAdder hostAdoptedPages = new LongAdder();
    final LongAdder backupsStarted = new LongAdder();
    final LongAdder backupsCompleted = new LongAdder();
    final LongAdder backupsSkipped = new LongAdder();
    final LongAdder loadsStarted = new LongAdder();
    final LongAdder loadsCompleted = new LongAdder();
    final LongAdder uploadedPages = new LongAdder();
    final LongAdder uploadSkippedPages = new LongAdder();
    final LongAdder prefetchesStarted = new LongAdder();
    final LongAdder prefetchesCompleted = new LongAdder();
    final LongAdder prefetchesRevoked = new LongAdder();
    final LongAdder prefetchesTimedOut = new LongAdder();
    final LongAdder prefetchesEmpty = new LongAdder();
    final LongAdder prefetchedPages = new LongAdder();
    final Map<PrefetchSkip, LongAdder> prefetchesSkipped = new ConcurrentHashMap<>();
    final LongAdder bytesDeviceToHost = new LongAdder();
    final LongAdder bytesHostToDevice = new LongAdder();
    final LongAdder bytesHostToStore = new LongAdder();
    final LongAdder bytesStoreToHost = new LongAdder();
    final Map<String, LongAdder> failures = new ConcurrentHashMap<>();

    void skipPrefetch(PrefetchSkip reason) {
        prefetchesSkipped.computeIfAbsent(reason, r -> new LongAdder()).increment();
    }

    void fail(String cause) {
        failures.computeIfAbsent(cause, c -> new LongAdder()).increment();
    }

    CacheStats snapshot(
            Map<String, Integer> queueDepths,
            long devicePages,
            long hostPages,
            long treeNodes,
            long corruptStorePages) {
        return new CacheStats(
                promptTokens.sum(),
                deviceHitTokens.sum(),
                hostHitTokens.sum(),
                storageHitTokens.sum(),
                computedTokens.sum(),
                deviceEvictedPages.sum(),
                deviceDeletedPages.sum(),
                hostEvictedPages.sum(),
                corruptHostPages.sum(),
                corruptStorePages,
                hostAdoptedPages.sum(),
                backupsStarted.sum(),
                backupsCompleted.sum(),
                backupsSkipped.sum(),
                loadsStarted.sum(),
                loadsCompleted.sum(),
                uploadedPages.sum(),
                uploadSkippedPages.sum(),
                prefetchesStarted.sum(),
                prefetchesCompleted.sum(),
                prefetchesRevoked.sum(),
                prefetchesTimedOut.sum(),
                prefetchesEmpty.sum(),
                prefetchedPages.sum(),
                sums(prefetchesSkipped),
                bytesDeviceToHost.sum(),
                bytesHostToDevice.sum(),
                bytesHostToStore.sum(),
                bytesStoreToHost.sum(),
                sums(failures),
                Map.copyOf(queueDepths),
                devicePages,
                hostPages,
                treeNodes);
    }

    private static <K extends Comparable<K>> Map<K, Long> sums(Map<K, LongAdder> counters) {
        Map<K, Long> out = new TreeMap<>();
        counters.forEach((k, v) -> out.put(k, v.sum()));
        return out;
    }
}
