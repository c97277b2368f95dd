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
import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Writes pages that reached the host pool to the page store (L2 to L3), on the loop {@code hicache-upload}
 * ({@code hicache-upload-threads} threads, so that a store whose calls wait on latency overlaps them). A thread takes
 * the queued uploads of several nodes together, up to {@code hicache-storage-batch-pages} pages, and pays the store's
 * per-call cost per batch: one leading-hits query per node, all at once (the leading pages the store already has, a
 * prefix uploaded by another engine or earlier, are skipped), then puts of up to a batch each, straight from the host
 * slab for page-first layouts (through a staging copy for layer_first).
 *
 * <p>A slow store must not freeze the host tier: a queued upload does not hold its node's host pages; only the one
 * being written protects them, while they are read. An upload whose pages left the host before its turn is dropped
 * (and counted: the prefix stays correct, L3 just lacks those pages). The queue is bounded in bytes
 * ({@code hicache-upload-queue-bytes}) as well as in entries. A node whose write failed is retried with backoff
 * (0.2 s, 0.4 s, 0.8 s), then counted as skipped: the pages stay cached on the host.
 *
 * <p>A store that stops answering ({@link TimedPageStore#admit}) is not written to: uploads are dropped and
 * counted until it answers again. A call is waited for until its deadline and {@link TimedPageStore#GRACE} after, then
 * given up; a given-up put keeps its host pages protected (and its staging memory) until the store answers it, since
 * the store may still be reading them. Closing interrupts the threads once the close timeout is nearly over.
 *
 * <p>Thread-safe.
 */
final class Uploader implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Uploader.class.getName());
    private static final int MAX_TRIES = 4;
    private static final long FIRST_BACKOFF_MILLIS = 200;

    private final CacheCore cache;
    private final Loop<Upload> loop;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicLong queuedBytes = new AtomicLong();
    /** "The store is too slow", once a minute at most. */
    private final RateLimitedLog slowStoreLog =
            new RateLimitedLog(LOG, System.Logger.Level.WARNING, Duration.ofSeconds(60));

    /**
     * One node's pages to write, how many times it was tried, and (when KV events are on) the run it is, captured
     * under the lock: the node may split or go while the store works.
     */
    private record Upload(
            TreeNode node,
            PageHashes hashes,
            int[] slots,
            int tries,
            CacheEvents.@Nullable Run run,
            RankAgreement.@Nullable Entry settling) {
        long bytes(long pageBytes) {
            return slots.length * pageBytes;
        }

        /** Done with it, written or not: for ranks that agree, its node's host pages may go once all are. */
        void ended() {
            if (settling != null) {
                settling.done(true);
            }
        }
    }

    /** Uploads a thread writes together, and the one it took that did not fit (written next), or null. */
    private record Batch(
            List<Upload> uploads, int pages, @Nullable Upload leftover) {}

    /** Pages {@code from..to} of an upload, in one put. */
    private record Part(Upload upload, List<StoreKey> keys, int from, int to) {}

    /**
     * Host pages the uploads being written may protect at once, a quarter of the host pool: however many threads
     * wait on a stalled store, the host keeps three quarters to evict from.
     */
    private final int hostPagesBudget;

    private final Object budgetLock = new Object();
    /** Host pages the batches being written protect now; guarded by {@link #budgetLock}. */
    private int hostPagesHeld;

    Uploader(CacheCore cache) {
        this.cache = cache;
        this.hostPagesBudget = cache.host == null ? 1 : Math.max(1, cache.host().capacity() / 4);
        this.loop = new Loop<>(
                "upload", cache.config.queueCapacity(), this::run, cache.metrics, null, cache.config.uploadThreads());
    }

    /**
     * Queues {@code node}'s pages; call with the cache's lock held. Skipped (and counted) when the queue is full, in
     * entries or in bytes. {@code write} false (ranks that agree, on an MLA rank that does not upload) only protects
     * the node's host pages as the uploading rank does, until the ranks agree its upload is done.
     */
    void upload(TreeNode node, boolean write) {
        RankAgreement.Entry settling = null;
        if (cache.agreement.enabled()) {
            // SGLang's protect_host at queueing: when the pages may go again is agreed by the ranks, not timed here
            cache.tree.protectHost(node);
            settling = cache.agreement.add(RankAgreement.Lane.UPLOADS, 0, ok -> cache.tree.releaseHost(node));
            if (!write) {
                settling.done(true);
                return;
            }
        }
        enqueue(new Upload(
                node,
                node.hashes(),
                Checks.checkNotNull(node.hostSlots(), "the host slots to upload")
                        .clone(),
                0,
                cache.events.enabled() ? cache.events.capture(node) : null,
                settling));
    }

    private void enqueue(Upload u) {
        long bytes = u.bytes(cache.format.pageBytes());
        if (queuedBytes.addAndGet(bytes) > cache.config.uploadQueueBytes()) {
            queuedBytes.addAndGet(-bytes);
            cache.metrics.uploadSkippedPages.add(u.slots.length);
            cache.metrics.fail("upload: queue full (hicache-upload-queue-bytes); the store is slower than the puts");
            // says where the upload threads wait: a slow store and a put that never returns look alike otherwise
            tooSlow(() -> "the upload queue is full (" + queuedBytes.get() + " bytes, hicache-upload-queue-bytes; the"
                    + " upload threads: " + loop.whereThreadsAre(8) + ")");
            u.ended();
            return;
        }
        inFlight.incrementAndGet();
        if (!loop.offer(u)) {
            queuedBytes.addAndGet(-bytes);
            inFlight.decrementAndGet();
            cache.metrics.uploadSkippedPages.add(u.slots.length);
            u.ended();
        }
    }

    private void run(Upload first) {
        for (Upload next = first; next != null; ) {
            Batch batch;
            try {
                batch = gather(next);
            } catch (InterruptedException e) { // closing, past hicache-close-timeout: it is not written
                queuedBytes.addAndGet(-next.bytes(cache.format.pageBytes()));
                cache.metrics.uploadSkippedPages.add(next.slots.length);
                next.ended();
                inFlight.decrementAndGet();
                return;
            }
            try {
                write(batch.uploads);
            } catch (RuntimeException e) { // never lose the batch behind it, nor the loop
                LOG.log(System.Logger.Level.ERROR, "an upload batch failed unexpectedly", e);
                cache.metrics.fail("upload: " + e.getClass().getSimpleName());
            } finally {
                synchronized (budgetLock) {
                    hostPagesHeld -= batch.pages;
                    budgetLock.notifyAll();
                }
            }
            next = batch.leftover;
        }
    }

    /** Protects the host pages of {@code uploads} while they are written, writes them, and retries what failed. */
    private void write(List<Upload> uploads) {
        List<Upload> live = new ArrayList<>(uploads.size());
        List<Upload> failed = List.of();
        CompletableFuture<?> lent = null;
        try {
            cache.lock.lock();
            try {
                for (Upload u : uploads) {
                    queuedBytes.addAndGet(-u.bytes(cache.format.pageBytes()));
                    // Its host pages may have gone (evicted, or the node split) while it waited: then there is
                    // nothing of it to read any more.
                    if (!Arrays.equals(u.node.hostSlots(), u.slots) || u.node.pending() != null) {
                        cache.metrics.uploadSkippedPages.add(u.slots.length);
                        cache.metrics.fail("upload: dropped, its host pages left before its turn");
                        tooSlow("uploads wait so long that their host pages are evicted first");
                        u.ended();
                        continue;
                    }
                    if (u.settling == null) { // ranks that agree protected it when it was queued
                        cache.tree.protectHost(u.node);
                    }
                    live.add(u);
                }
            } finally {
                cache.lock.unlock();
            }
            if (!live.isEmpty()) {
                boolean answers = cache.admitStoreWork(TimedPageStore.Kind.QUERY, TimedPageStore.Kind.PUT)
                        != TimedPageStore.Admission.NO;
                PageStore store = answers ? cache.stores.acquire() : null;
                if (store == null) { // detached past its drain time, or silent: these pages stay cached, L3 lacks them
                    for (Upload u : live) {
                        cache.metrics.uploadSkippedPages.add(u.slots.length);
                    }
                    cache.metrics.fail(
                            cache.stores.attached()
                                    ? "upload: dropped, the page store does not answer"
                                    : "upload: dropped, the page store was detached");
                } else {
                    Written w = null;
                    try {
                        w = write(store, live);
                        failed = w.retry();
                    } finally {
                        if (w == null || w.lent() == null) {
                            cache.stores.release(store);
                        } else {
                            lent = w.lent(); // the store still reads the pages: they stay protected until it answers
                            lent.whenComplete((v, e) -> cache.stores.release(store));
                        }
                    }
                }
            }
        } finally {
            if (!live.isEmpty()) {
                List<Upload> done = live;
                List<Upload> retried = failed;
                if (lent == null) {
                    unprotect(done, retried);
                } else {
                    lent.whenComplete((v, e) -> unprotect(done, retried));
                }
            }
            for (Upload u : failed) {
                retryLater(u);
            }
            inFlight.addAndGet(-uploads.size());
        }
    }

    /** Lets the host pages of uploads that were written (or given up) go again. */
    private void unprotect(List<Upload> live, List<Upload> failed) {
        cache.lock.lock();
        try {
            for (Upload u : live) {
                if (u.settling == null) {
                    cache.tree.releaseHost(u.node);
                } else if (!failed.contains(u)) {
                    u.ended();
                }
            }
        } finally {
            cache.lock.unlock();
        }
    }

    /**
     * What writing a batch of uploads left: those to try again, and a put the store has not answered yet (null: none),
     * whose pages and staging memory it may still be reading.
     */
    private record Written(List<Upload> retry, @Nullable CompletableFuture<?> lent) {}

    /**
     * {@code first} and the uploads queued behind it, up to about a batch of pages and within the host pages budget;
     * waits for budget for {@code first} (a thread always gets its first upload's worth once the others are done).
     */
    private Batch gather(Upload first) throws InterruptedException {
        int batch = cache.config.storageBatchPages();
        synchronized (budgetLock) {
            while (hostPagesHeld > 0 && hostPagesHeld + first.slots.length > hostPagesBudget) {
                budgetLock.wait();
            }
            hostPagesHeld += first.slots.length;
            List<Upload> taken = new ArrayList<>();
            taken.add(first);
            int pages = first.slots.length;
            while (pages < batch) {
                Upload next = loop.pollQueued();
                if (next == null) {
                    break;
                }
                if (hostPagesHeld + next.slots.length > hostPagesBudget) {
                    return new Batch(taken, pages, next);
                }
                hostPagesHeld += next.slots.length;
                pages += next.slots.length;
                taken.add(next);
            }
            return new Batch(taken, pages, null);
        }
    }

    /**
     * Says (at most once a minute) that the page store cannot keep up: the counts behind it are in the cache's
     * failures ({@code upload: queue full}, {@code upload: dropped}) and the {@code upload-pages} queue depth.
     */
    private void tooSlow(String why) {
        tooSlow(() -> why);
    }

    private void tooSlow(Supplier<String> why) {
        slowStoreLog.log(() -> "the page store '"
                + cache.stores.current().map(PageStore::name).orElse("?")
                + "' is slower than this cache writes pages: " + why.get() + "; L3 will miss pages the host evicts "
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
                enqueue(new Upload(u.node, u.hashes, u.slots, u.tries + 1, u.run, u.settling));
            } finally {
                inFlight.decrementAndGet();
            }
        });
    }

    /**
     * Writes the pages of {@code uploads} (their host pages protected) that the store lacks; returns those to try
     * again: some of their pages failed and they have tries left (their pages are counted by the retry).
     */
    private Written write(PageStore store, List<Upload> uploads) {
        List<List<StoreKey>> keys = new ArrayList<>(uploads.size());
        List<CompletableFuture<Integer>> asks = new ArrayList<>(uploads.size());
        Deadline askDeadline = deadline();
        for (Upload u : uploads) {
            List<StoreKey> k = new ArrayList<>(u.slots.length);
            for (int i = 0; i < u.slots.length; i++) {
                k.add(cache.namespace.key(u.hashes.get(i)));
            }
            keys.add(k);
            asks.add(store.leadingHits(k, askDeadline));
        }
        List<Part> parts = new ArrayList<>();
        int batch = cache.config.storageBatchPages();
        int[] have = new int[uploads.size()];
        for (int n = 0; n < uploads.size(); n++) {
            Upload u = uploads.get(n);
            have[n] = haveOrNone(asks.get(n), askDeadline);
            for (int from = have[n]; from < u.slots.length; from += batch) {
                parts.add(new Part(u, keys.get(n), from, Math.min(u.slots.length, from + batch)));
            }
        }
        Map<Upload, int[]> written = new IdentityHashMap<>(); // OK, EXISTS, failed pages
        Arena staging = Arena.ofShared();
        CompletableFuture<BatchResult> lent = null;
        try {
            for (int p = 0; p < parts.size() && lent == null; ) {
                // Parts of several uploads share a put, up to a batch of pages.
                List<Part> put = new ArrayList<>();
                int pages = 0;
                while (p < parts.size() && (put.isEmpty() || pages + size(parts.get(p)) <= batch)) {
                    pages += size(parts.get(p));
                    put.add(parts.get(p++));
                }
                lent = put(store, put, staging, written); // a put given up ends the batch: the store is not answering
            }
        } finally {
            if (lent == null) {
                staging.close();
            } else {
                lent.whenComplete((v, e) -> staging.close());
            }
        }
        List<Upload> retry = new ArrayList<>();
        for (int n = 0; n < uploads.size(); n++) {
            Upload u = uploads.get(n);
            int[] w = written.getOrDefault(u, new int[3]);
            if (w[2] > 0 && u.tries + 1 < MAX_TRIES && lent == null) {
                retry.add(u); // what it skipped is counted by the retry
            } else {
                int unwritten = u.slots.length - have[n] - w[0] - w[1] - w[2]; // parts after a given-up put
                cache.metrics.uploadSkippedPages.add(have[n] + w[1] + w[2] + unwritten);
            }
        }
        return new Written(retry, lent);
    }

    private static int size(Part part) {
        return part.to - part.from;
    }

    /** How many leading pages the store has, or none when it could not say (the put then says EXISTS). */
    private int haveOrNone(CompletableFuture<Integer> ask, Deadline deadline) {
        try {
            return ask.get(givenUpAfterMillis(deadline), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // closing: the thread stops at its next wait
            return 0;
        } catch (Exception e) {
            cache.metrics.fail("upload: leading hits "
                    + (e instanceof TimeoutException
                            ? "given up past its deadline"
                            : e.getClass().getSimpleName()));
            return 0;
        }
    }

    /**
     * One put of {@code parts}; adds each upload's OK, EXISTS and failed pages to {@code written}. Returns the put's
     * future when it was given up unanswered (the store may still read its pages), else null.
     */
    private @Nullable CompletableFuture<BatchResult> put(
            PageStore store, List<Part> parts, Arena staging, Map<Upload, int[]> written) {
        long pageBytes = cache.format.pageBytes();
        boolean direct = cache.format.layout() != HostLayout.LAYER_FIRST;
        PageBatch.Builder batch =
                PageBatch.builder(parts.stream().mapToInt(Uploader::size).sum());
        Map<Part, boolean[]> damaged = new HashMap<>();
        for (Part part : parts) {
            for (int i = part.from; i < part.to; i++) {
                // Damaged host bytes must not reach the store under a fresh, valid checksum: one CRC pass per page,
                // small next to the store's write.
                if (!cache.host().holdsIntact(part.upload.slots[i], part.keys.get(i), true)) {
                    damaged.computeIfAbsent(part, p -> new boolean[size(p)])[i - part.from] = true;
                    cache.metrics.corruptHostPages.increment();
                    cache.host().condemn(part.upload.slots[i]); // dropped from the tree at its next load-back
                    continue;
                }
                MemorySegment page;
                if (direct) {
                    page = cache.host().slab().page(part.upload.slots[i]);
                } else {
                    page = staging.allocate(pageBytes, 64);
                    cache.host().slab().readPage(part.upload.slots[i], page);
                }
                batch.add(part.keys.get(i), page);
            }
        }
        BatchResult r = null;
        CompletableFuture<BatchResult> call = null;
        CompletableFuture<BatchResult> lent = null;
        Deadline deadline = deadline();
        try {
            call = store.put(batch.build(), deadline);
            r = call.get(givenUpAfterMillis(deadline), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // closing: the thread stops at its next wait
            lent = call;
        } catch (TimeoutException e) {
            cache.metrics.fail("upload: put given up past its deadline");
            lent = call;
        } catch (Exception e) {
            cache.metrics.fail("upload: " + e.getClass().getSimpleName());
        }
        int at = 0;
        for (Part part : parts) {
            int[] w = written.computeIfAbsent(part.upload, u -> new int[3]);
            int ok = 0;
            int runFrom = -1; // a run of pages written (OK), announced when it ends
            boolean[] bad = damaged.get(part);
            for (int i = 0; i < size(part); i++) {
                PageStatus status = bad != null && bad[i]
                        ? PageStatus.CORRUPT // not sent
                        : r == null ? PageStatus.FAILED : r.status(at++);
                if (status == PageStatus.OK) {
                    ok++;
                    runFrom = runFrom < 0 ? part.from + i : runFrom;
                    continue;
                }
                if (status == PageStatus.EXISTS || status == PageStatus.CORRUPT) {
                    w[1]++; // the store has it, or (damaged on the host) it must never go there: not retried
                } else {
                    w[2]++;
                }
                announce(part.upload, runFrom, part.from + i);
                runFrom = -1;
            }
            announce(part.upload, runFrom, part.to);
            w[0] += ok;
            cache.metrics.uploadedPages.add(ok);
            cache.metrics.bytesHostToStore.add(ok * pageBytes);
        }
        if (r != null && r.successCount() < r.size()) {
            cache.metrics.fail("upload: " + firstFailure(r));
        }
        return lent;
    }

    /** Publishes that pages {@code [from, to)} of {@code u} reached the store (nothing for {@code from} -1). */
    private void announce(Upload u, int from, int to) {
        if (from >= 0 && u.run != null) {
            cache.events.stored(u.run, from, to, cache.events.storeMedium);
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

    /** How long to wait for a call made with {@code deadline} before giving it up: its time and the grace after. */
    private static long givenUpAfterMillis(Deadline deadline) {
        return deadline.remaining().plus(TimedPageStore.GRACE).toMillis();
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

    /** Whether its loop's threads have ended: for tests. */
    boolean ended() {
        return loop.ended();
    }

    /** Stops the loop, letting queued uploads run for up to {@code waitMillis}; what is left is not written. */
    void close(long waitMillis) {
        loop.close(waitMillis);
    }
}
