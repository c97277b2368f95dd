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
import io.hicache.core.util.RateLimitedLog;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Writes pages that reached the host pool to the page store (L2 to L3), on the loop {@code hicache-upload}: in
 * batches of {@code hicache-storage-batch-pages}, skipping the leading pages the store already has (a prefix
 * uploaded by another engine, or earlier), straight from the host slab for page-first layouts (through a staging
 * copy for layer_first).
 *
 * <p>A slow store must not freeze the host tier: a queued upload does not hold its node's host pages; only the one
 * being written protects them, while they are read. An upload whose pages left the host before its turn is dropped
 * (and counted: the prefix stays correct, L3 just lacks those pages). The queue is bounded in bytes
 * ({@code hicache-upload-queue-bytes}) as well as in entries. A failed write is retried with backoff (0.2 s, 0.4 s,
 * 0.8 s), then counted as skipped: the pages stay cached on the host.
 *
 * <p>Thread-safe.
 */
final class Uploader implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Uploader.class.getName());
    private static final int MAX_TRIES = 4;
    private static final long FIRST_BACKOFF_MILLIS = 200;

    private final HiCache cache;
    private final Loop<Upload> loop;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicLong queuedBytes = new AtomicLong();
    /** "The store is too slow", once a minute at most. */
    private final RateLimitedLog slowStoreLog = new RateLimitedLog(LOG, System.Logger.Level.WARNING, 60_000);

    /** One node's pages to write, and how many times it was tried. */
    private record Upload(TreeNode node, PageHashes hashes, int[] slots, int tries) {
        long bytes(long pageBytes) {
            return slots.length * pageBytes;
        }
    }

    Uploader(HiCache cache) {
        this.cache = cache;
        this.loop = new Loop<>("upload", cache.config.queueCapacity(), this::run, cache.metrics);
    }

    /**
     * Queues {@code node}'s pages; call with the cache's lock held. Skipped (and counted) when the queue is full, in
     * entries or in bytes.
     */
    void upload(TreeNode node) {
        enqueue(new Upload(node, node.hashes(), node.hostSlots().clone(), 0));
    }

    private void enqueue(Upload u) {
        long bytes = u.bytes(cache.format.pageBytes());
        if (queuedBytes.addAndGet(bytes) > cache.config.uploadQueueBytes()) {
            queuedBytes.addAndGet(-bytes);
            cache.metrics.uploadSkippedPages.add(u.slots.length);
            cache.metrics.fail("upload: queue full (hicache-upload-queue-bytes); the store is slower than the puts");
            tooSlow("the upload queue is full (" + queuedBytes.get() + " bytes, hicache-upload-queue-bytes)");
            return;
        }
        inFlight.incrementAndGet();
        if (!loop.offer(u)) {
            queuedBytes.addAndGet(-bytes);
            inFlight.decrementAndGet();
            cache.metrics.uploadSkippedPages.add(u.slots.length);
        }
    }

    private void run(Upload u) {
        queuedBytes.addAndGet(-u.bytes(cache.format.pageBytes()));
        boolean protectedNow = false;
        boolean failed = false;
        try {
            cache.lock.lock();
            try {
                // Its host pages may have gone (evicted, or the node split) while it waited: then there is nothing
                // of it to read any more.
                if (!java.util.Arrays.equals(u.node.hostSlots(), u.slots) || u.node.pending() != null) {
                    cache.metrics.uploadSkippedPages.add(u.slots.length);
                    cache.metrics.fail("upload: dropped, its host pages left before its turn");
                    tooSlow("uploads wait so long that their host pages are evicted first");
                    return;
                }
                cache.tree.protectHost(u.node);
                protectedNow = true;
            } finally {
                cache.lock.unlock();
            }
            PageStore store = cache.store.orElseThrow();
            int batch = cache.config.storageBatchPages();
            for (int from = 0; from < u.slots.length; from += batch) {
                int to = Math.min(u.slots.length, from + batch);
                failed |= !write(store, u, from, to, u.tries + 1 < MAX_TRIES);
            }
        } finally {
            if (protectedNow) {
                cache.lock.lock();
                try {
                    cache.tree.releaseHost(u.node);
                } finally {
                    cache.lock.unlock();
                }
            }
            if (failed) {
                retryLater(u);
            }
            inFlight.decrementAndGet();
        }
    }

    /**
     * Says (at most once a minute) that the page store cannot keep up: the counts behind it are in the cache's
     * failures ({@code upload: queue full}, {@code upload: dropped}) and the {@code upload-pages} queue depth.
     */
    private void tooSlow(String why) {
        slowStoreLog.log("the page store '" + cache.store.map(PageStore::name).orElse("?")
                + "' is slower than this cache writes pages: " + why + "; L3 will miss pages the host evicts "
                + "(the host tier goes on unhindered). A faster store, or fewer pages written, would help.");
    }

    /** Pages waiting for upload now: the write-behind's lag. */
    int queuedPages() {
        return (int) Math.min(Integer.MAX_VALUE, queuedBytes.get() / cache.format.pageBytes());
    }

    /** Queues {@code u} again after a backoff; it is counted in flight meanwhile, so that quiescing waits for it. */
    private void retryLater(Upload u) {
        long delay = FIRST_BACKOFF_MILLIS << u.tries;
        inFlight.incrementAndGet();
        CompletableFuture.delayedExecutor(delay, TimeUnit.MILLISECONDS).execute(() -> {
            try {
                cache.metrics.fail("upload: retried after a failure");
                enqueue(new Upload(u.node, u.hashes, u.slots, u.tries + 1));
            } finally {
                inFlight.decrementAndGet();
            }
        });
    }

    /**
     * Writes pages {@code from..to} of {@code u}; false if some could not be written and {@code mayRetry} (they are
     * then not counted yet: the retry counts them).
     */
    private boolean write(PageStore store, Upload u, int from, int to, boolean mayRetry) {
        List<StoreKey> keys = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
            keys.add(cache.namespace.key(u.hashes.get(i)));
        }
        long pageBytes = cache.format.pageBytes();
        try (Arena staging = Arena.ofShared()) {
            int have = store.leadingHits(keys, deadline()).get(timeoutMillis(), TimeUnit.MILLISECONDS);
            if (have == keys.size()) {
                cache.metrics.uploadSkippedPages.add(have);
                return true;
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
            cache.metrics.bytesHostToStore.add(r.count(PageStatus.OK) * pageBytes);
            if (r.count(PageStatus.OK) > 0) {
                cache.publish(KvEvent.Type.STORED, KvEvent.Tier.STORE, u.hashes.slice(from + have, to));
            }
            if (stored < r.size()) {
                cache.metrics.fail("upload: " + firstFailure(r));
                if (mayRetry) {
                    cache.metrics.uploadSkippedPages.add(have + r.count(PageStatus.EXISTS));
                    return false;
                }
            }
            cache.metrics.uploadSkippedPages.add(have + r.size() - r.count(PageStatus.OK));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            cache.metrics.uploadSkippedPages.add(to - from);
            return true;
        } catch (Exception e) {
            cache.metrics.fail("upload: " + e.getClass().getSimpleName());
            if (mayRetry) {
                return false;
            }
            cache.metrics.uploadSkippedPages.add(to - from);
            return true;
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

    /** Stops the loop, letting queued uploads run for up to {@code waitMillis}; what is left is not written. */
    void close(long waitMillis) {
        loop.close(waitMillis);
    }
}
