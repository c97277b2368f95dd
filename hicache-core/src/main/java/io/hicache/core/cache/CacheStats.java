package io.hicache.core.cache;

import java.util.Map;

/**
 * A snapshot of the cache's counters (totals since it opened) and gauges (now). Immutable.
 *
 * @param promptTokens        tokens of every prompt given to {@link HiCache#request}
 * @param deviceHitTokens     of those, found on the device
 * @param hostHitTokens       found only in the host pool (and loaded back or available to load)
 * @param storageHitTokens    fetched from the page store by prefetches that requests used
 * @param computedTokens      committed by requests beyond what the cache served: computed by the engine
 * @param deviceEvictedPages  device pages freed by demoting backed-up nodes to host-only
 * @param deviceDeletedPages  device pages freed by removing nodes that were not backed up
 * @param hostEvictedPages    host slots freed by host eviction
 * @param corruptHostPages    host pages found misnamed or damaged at a load-back or upload (docs/keys.md): never
 *                            loaded or uploaded, dropped from the tree with what hangs below them
 * @param corruptStorePages   pages the page store found damaged or misnamed on a get (and removed), since it was
 *                            attached
 * @param hostAdoptedPages    host pages an earlier run left (a warm host tier after a restart) that requests found
 *                            and took into the tree
 * @param backupsStarted      device-to-host backups started
 * @param backupsCompleted    and completed
 * @param backupsSkipped      not started: no host room, or the pages are already there
 * @param loadsStarted        host-to-device loads started
 * @param loadsCompleted      and completed
 * @param uploadedPages       pages written to the page store
 * @param uploadSkippedPages  pages the store already had, or that could not be written
 * @param prefetchesStarted   prefetches from the page store started
 * @param prefetchesCompleted of those, ended with pages used
 * @param prefetchesRevoked   ended because the store had too few of the pages
 * @param prefetchesTimedOut  ended by the {@code timeout} policy before their fetch finished, with no page used
 * @param prefetchesEmpty     ended with no page used otherwise: the request left first, the fetch failed or was given
 *                            up, the store went away, or the tree had the pages already. Started prefetches that
 *                            ended are exactly completed + revoked + timed out + empty
 * @param prefetchedPages     pages fetched and landed in the tree
 * @param prefetchesSkipped   prefetches not started, by reason
 * @param bytesDeviceToHost   bytes copied from device to host
 * @param bytesHostToDevice   bytes copied from host to device
 * @param bytesHostToStore    bytes written to the page store
 * @param bytesStoreToHost    bytes read from the page store
 * @param failures            failures by cause (a failed store call, a failed copy, a full queue, ...)
 * @param queueDepths         entries waiting in each background loop's queue, now
 * @param devicePages         device pages the tree holds, now
 * @param hostPages           host slots the tree holds, now
 * @param treeNodes           nodes in the tree, now
 */
public record CacheStats(
        long promptTokens,
        long deviceHitTokens,
        long hostHitTokens,
        long storageHitTokens,
        long computedTokens,
        long deviceEvictedPages,
        long deviceDeletedPages,
        long hostEvictedPages,
        long corruptHostPages,
        long corruptStorePages,
        long hostAdoptedPages,
        long backupsStarted,
        long backupsCompleted,
        long backupsSkipped,
        long loadsStarted,
        long loadsCompleted,
        long uploadedPages,
        long uploadSkippedPages,
        long prefetchesStarted,
        long prefetchesCompleted,
        long prefetchesRevoked,
        long prefetchesTimedOut,
        long prefetchesEmpty,
        long prefetchedPages,
        Map<PrefetchSkip, Long> prefetchesSkipped,
        long bytesDeviceToHost,
        long bytesHostToDevice,
        long bytesHostToStore,
        long bytesStoreToHost,
        Map<String, Long> failures,
        Map<String, Integer> queueDepths,
        long devicePages,
        long hostPages,
        long treeNodes) {}
