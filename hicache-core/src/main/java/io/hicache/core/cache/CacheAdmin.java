package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.Medium;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.PagePart;
import io.hicache.core.store.PageStore;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.util.Checks;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The operator's calls on a running cache, as SGLang has them ({@code /flush_cache}, attaching and detaching the
 * storage backend at run time, {@code clear_storage_backend}): what {@link HiCache#admin()} returns. Requests may run
 * while they do (a reset excepted).
 *
 * <p>Thread-safe: what it changes is guarded by the cache's lock and its store slot. Holds nothing of its own; valid
 * while the cache is open.
 */
public final class CacheAdmin {
    private final CacheCore cache;

    CacheAdmin(CacheCore cache) {
        this.cache = cache;
    }

    /** What {@link #flush} or {@link #reset} dropped: device pages, and host pages (earlier runs' leftovers included). */
    public record Flushed(long devicePages, long hostPages) {}

    /**
     * Drops every page of the device and host tiers that no open request pins, after waiting up to {@code timeout}
     * for copies, uploads and prefetches in flight; the page store keeps its pages (see {@link #reset}). Requests may
     * run meanwhile: theirs stay, and pages they commit afterwards are cached as usual. SGLang's {@code /flush_cache}.
     */
    public Flushed flush(Duration timeout) throws InterruptedException {
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
                cache.deviceTier.applyEviction(e);
                int hostFreed = 0;
                if (cache.host != null) {
                    RadixTree.HostEviction h = cache.tree.evictHostReporting((int) cache.tree.hostPages());
                    cache.host().release(h.freedSlots());
                    cache.metrics.hostEvictedPages.add(h.freedSlots().length);
                    for (PageHashes run : h.removed()) {
                        cache.events.removed(run, Medium.CPU);
                    }
                    hostFreed = h.freedSlots().length;
                }
                freedAny = e.freedPages().length > 0 || hostFreed > 0;
            }
            if (cache.parts != null) {
                cache.parts.clear(); // a hybrid model's prefix ends: what requests pin stays, as their pages do
            }
            return new Flushed(device - cache.tree.devicePages(), host - cache.tree.hostPages() + leftovers);
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * Detaches the page store while requests run, and hands it back (empty when none was attached); the caller owns it
     * from then on and closes it. Uploads queued before the call are written to it first (up to {@code timeout}),
     * uploads of pages cached after it are skipped, prefetches stop at their next batch and end with what landed. No
     * request fails because of it; requests from now on see no page store until {@link #attachStore}. Returns once
     * nothing uses the store any more, or when {@code timeout} is up (a call still running then ends as its deadline
     * says, and its failure, if any, is counted, never a request's).
     */
    public Optional<PageStore> detachStore(Duration timeout) throws InterruptedException {
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
            return Optional.empty();
        }
        cache.stores.awaitUnused(detached, end);
        return Optional.of(((TimedPageStore) detached).inner()); // handed back as it was given
    }

    /**
     * Attaches {@code store} as the page store, used from the next request on; the cache owns it from here (closes it
     * when it closes, or hands it back on {@link #detachStore}). Its keys carry this cache's namespace.
     *
     * @throws IllegalStateException when a store is attached: detach it first
     */
    public void attachStore(PageStore store) {
        Checks.checkNotNull(store, "store");
        cache.checkOpen();
        cache.lock.lock();
        try {
            cache.stores.attach(cache.timed(store));
            cache.events.storeMedium = CacheCore.storeMedium(store);
        } finally {
            cache.lock.unlock();
        }
    }

    /** Whether a page store is attached now. */
    public boolean storeAttached() {
        return cache.stores.attached();
    }

    /**
     * Empties the cache: {@link #flush}, then removes this cache's namespace from the attached page store (other
     * namespaces in it stay) and announces AllBlocksCleared. SGLang's {@code reset} with {@code clear_storage_backend}.
     *
     * @throws IllegalStateException when requests are open (their pages are pinned)
     * @throws HiCacheException {@link ErrorCode#STORE_IO} when the store could not clear the namespace
     */
    public Flushed reset(Duration timeout) throws InterruptedException {
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
        Flushed flushed = flush(timeout);
        PageStore store = cache.stores.acquire();
        if (store != null) {
            try {
                long leftMillis = Math.max(1, (end - System.nanoTime()) / 1_000_000);
                List<Namespace> namespaces = new ArrayList<>(List.of(cache.namespace));
                if (cache.parts != null) {
                    namespaces.add(cache.partNamespace(PagePart.SLIDING_WINDOW));
                    namespaces.add(cache.partNamespace(PagePart.RECURRENT_STATE));
                }
                for (Namespace ns : namespaces) {
                    store.clear(ns, Deadline.after(Duration.ofMillis(leftMillis)))
                            .get(leftMillis + 5_000, TimeUnit.MILLISECONDS);
                }
            } catch (ExecutionException | TimeoutException e) {
                throw new HiCacheException(
                        ErrorCode.STORE_IO,
                        "reset: clearing namespace " + cache.namespace.id() + " in the page store failed: " + e,
                        e);
            } finally {
                cache.stores.release(store);
            }
        }
        cache.events.cleared();
        return flushed;
    }
}
