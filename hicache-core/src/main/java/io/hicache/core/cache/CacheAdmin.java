package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHashes;
import io.hicache.core.store.PageStore;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.util.Checks;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The operator's operations on a running cache, as SGLang has them ({@code /flush_cache}, attaching and detaching
 * the storage backend at run time, {@code clear_storage_backend}): {@link HiCache#flush}, {@link HiCache#detachStore},
 * {@link HiCache#attachStore} and {@link HiCache#reset} delegate here. Stateless; what it changes is guarded by the
 * cache's lock and its store slot.
 */
final class CacheOperations {
    private CacheOperations() {
    }

    /** What a flush dropped: device pages, and host pages (leftovers of an earlier run included). */
    static HiCache.Flushed flush(HiCache cache, Duration timeout) throws InterruptedException {
        cache.checkOpen();
        cache.quiesce(timeout); // copies, uploads and prefetches in flight first: they hold pages a flush cannot take
        cache.lock.lock();
        try {
            long device = cache.tree.devicePages();
            long host = cache.tree.hostPages();
            long leftovers = cache.leftovers.releaseAll();
            boolean freedAny = true;
            while (freedAny) {
                // A device node that is not backed up and has host-only children goes once they have gone: alternate.
                RadixTree.DeviceEviction e = cache.tree.evictDevice((int) cache.tree.devicePages(), false);
                cache.applyDeviceEviction(e);
                int hostFreed = 0;
                if (cache.host != null) {
                    RadixTree.HostEviction h = cache.tree.evictHostReporting((int) cache.tree.hostPages());
                    cache.host.release(h.freedSlots());
                    cache.metrics.hostEvictedPages.add(h.freedSlots().length);
                    for (PageHashes run : h.removed()) {
                        cache.events.removed(run, Medium.CPU);
                    }
                    hostFreed = h.freedSlots().length;
                }
                freedAny = e.freedPages().length > 0 || hostFreed > 0;
            }
            return new HiCache.Flushed(device - cache.tree.devicePages(),
                    host - cache.tree.hostPages() + leftovers);
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * Detaches the store: uploads queued before are written to it (up to {@code timeout}), new ones are skipped,
     * prefetches stop at their next batch, and it is handed back once nothing uses it (or the time is up).
     */
    static PageStore detachStore(HiCache cache, Duration timeout) throws InterruptedException {
        cache.checkOpen();
        long end = System.nanoTime() + timeout.toNanos();
        cache.stores.stopWrites();
        while (!cache.uploader.idle() && System.nanoTime() < end) {
            Thread.sleep(1);
        }
        PageStore detached;
        cache.lock.lock();
        try {
            detached = cache.stores.detach(false);
            cache.prefetcher.cancelAll();
        } finally {
            cache.lock.unlock();
        }
        if (detached == null) {
            return null;
        }
        cache.stores.awaitUnused(detached, end);
        return ((TimedPageStore) detached).inner(); // handed back as it was given
    }

    /** Attaches {@code store}; the cache owns it from here. */
    static void attachStore(HiCache cache, PageStore store) {
        Checks.checkNotNull(store, "store");
        cache.checkOpen();
        cache.lock.lock();
        try {
            cache.stores.attach(cache.timed(store));
            cache.events.storeMedium = HiCache.storeMedium(store);
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * Flushes, then removes this cache's namespace from the attached store and announces AllBlocksCleared. Refused
     * while requests are open: a reset empties every tier, and their pages are pinned.
     */
    static HiCache.Flushed reset(HiCache cache, Duration timeout) throws InterruptedException {
        cache.lock.lock();
        try {
            int open = cache.openRequestCount();
            if (open > 0) {
                throw new IllegalStateException("reset needs every request closed; " + open + " are open");
            }
        } finally {
            cache.lock.unlock();
        }
        long end = System.nanoTime() + timeout.toNanos();
        HiCache.Flushed flushed = flush(cache, timeout);
        PageStore store = cache.stores.acquire();
        if (store != null) {
            try {
                long leftMillis = Math.max(1, (end - System.nanoTime()) / 1_000_000);
                store.clear(cache.namespace, Deadline.after(Duration.ofMillis(leftMillis)))
                        .get(leftMillis + 5_000, TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException e) {
                throw new HiCacheException(ErrorCode.STORE_IO, "reset: clearing namespace " + cache.namespace.id()
                        + " in the page store failed: " + e, e);
            } finally {
                cache.stores.release(store);
            }
        }
        cache.events.cleared();
        return flushed;
    }
}
