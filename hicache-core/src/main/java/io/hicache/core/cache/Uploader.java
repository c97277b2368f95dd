package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.HostLayout;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.tree.TreeNode;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Writes pages that reached the host pool to the page store (L2 to L3), on the loop {@code hicache-upload}: in
 * batches of {@code hicache-storage-batch-pages}, skipping the leading pages the store already has (a prefix
 * uploaded by another engine, or earlier), straight from the host slab for page-first layouts (through a staging
 * copy for layer_first). The node's host slots are protected from eviction while they are read. A failed call
 * counts its pages as skipped: the pages stay cached on the host.
 *
 * <p>Thread-safe.
 */
final class Uploader implements AutoCloseable {
    private final HiCache cache;
    private final Loop<Upload> loop;
    private final AtomicInteger inFlight = new AtomicInteger();

    /** One node's pages to write. */
    private record Upload(TreeNode node, PageHashes hashes, int[] slots) {
    }

    Uploader(HiCache cache) {
        this.cache = cache;
        this.loop = new Loop<>("upload", cache.config.queueCapacity(), this::run, cache.metrics);
    }

    /** Queues {@code node}'s pages; call with the cache's lock held. Skipped (and counted) when the queue is full. */
    void upload(TreeNode node) {
        Upload u = new Upload(node, node.hashes(), node.hostSlots().clone());
        cache.tree.protectHost(node);
        inFlight.incrementAndGet();
        if (!loop.offer(u)) {
            cache.tree.releaseHost(node);
            inFlight.decrementAndGet();
            cache.metrics.uploadSkippedPages.add(u.slots.length);
        }
    }

    private void run(Upload u) {
        try {
            PageStore store = cache.store.orElseThrow();
            int batch = cache.config.storageBatchPages();
            for (int from = 0; from < u.slots.length; from += batch) {
                int to = Math.min(u.slots.length, from + batch);
                write(store, u, from, to);
            }
        } finally {
            cache.lock.lock();
            try {
                cache.tree.releaseHost(u.node);
            } finally {
                cache.lock.unlock();
                inFlight.decrementAndGet();
            }
        }
    }

    private void write(PageStore store, Upload u, int from, int to) {
        List<StoreKey> keys = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
            keys.add(cache.namespace.key(u.hashes.get(i)));
        }
        long pageBytes = cache.format.pageBytes();
        try (Arena staging = Arena.ofShared()) {
            int have = store.leadingHits(keys, deadline()).get(timeoutMillis(), TimeUnit.MILLISECONDS);
            cache.metrics.uploadSkippedPages.add(have);
            if (have == keys.size()) {
                return;
            }
            boolean direct = cache.format.layout() != HostLayout.LAYER_FIRST;
            List<MemorySegment> pages = new ArrayList<>(keys.size() - have);
            for (int i = from + have; i < to; i++) {
                if (direct) {
                    pages.add(cache.host.slab().page(u.slots[i]));
                } else {
                    MemorySegment flat = staging.allocate(pageBytes, 64);
                    cache.host.slab().readPage(u.slots[i], flat);
                    pages.add(flat);
                }
            }
            BatchResult r = store.put(PageBatch.of(keys.subList(have, keys.size()), pages), deadline())
                    .get(timeoutMillis(), TimeUnit.MILLISECONDS);
            int stored = r.count(PageStatus.OK) + r.count(PageStatus.EXISTS);
            cache.metrics.uploadedPages.add(r.count(PageStatus.OK));
            cache.metrics.uploadSkippedPages.add(r.size() - r.count(PageStatus.OK));
            cache.metrics.bytesHostToStore.add(r.count(PageStatus.OK) * pageBytes);
            if (stored < r.size()) {
                cache.metrics.fail("upload: " + firstFailure(r));
            }
            if (r.count(PageStatus.OK) > 0) {
                cache.publish(KvEvent.Type.STORED, KvEvent.Tier.STORE, u.hashes.slice(from + have, to));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            cache.metrics.uploadSkippedPages.add(to - from);
        } catch (Exception e) {
            cache.metrics.uploadSkippedPages.add(to - from);
            cache.metrics.fail("upload: " + e.getClass().getSimpleName());
        }
    }

    static String firstFailure(BatchResult r) {
        for (int i = 0; i < r.size(); i++) {
            if (!r.status(i).isSuccess()) {
                return r.status(i).name();
            }
        }
        return "none";
    }

    private Deadline deadline() {
        return Deadline.after(cache.config.storageTimeout());
    }

    private long timeoutMillis() {
        return cache.config.storageTimeout().toMillis() + 5_000;
    }

    int depth() {
        return loop.depth();
    }

    boolean idle() {
        return inFlight.get() == 0;
    }

    @Override
    public void close() {
        loop.close();
    }
}
