package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.PriorityBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * Writes pages put into the daemon's slab behind to its L3 store, on the thread {@code hicache-server-write-behind}:
 * in batches of up to 128, straight from the slab. A page stays in the slab (and is not evictable) until L3 has it.
 * A failed write is logged (rate-limited, with its cause) and retried with backoff; a page that still fails after
 * {@code server.write-behind-max-tries} tries is given up: logged at ERROR by name, counted, kept in the slab as a
 * page L3 lacks (evictable, so the slab cannot fill up with them) and reported by {@link #abandonedPages()}.
 * Closing waits (up to its timeout) until every page put has been written, retrying every 50 ms without giving up,
 * and names the acknowledged pages that did not reach L3.
 *
 * <p>A page that a clear queued or running covers ({@link L3Clears#holds}) is held back, not written, until that
 * clear has ended: the clear would remove it from L3 (and the page, acknowledged after the clear was asked, must
 * survive it). It stays in the slab meanwhile, pending and not evictable.
 *
 * <p>When the store is detached (STORE DETACH), the pages still waiting are dropped as their turn comes (retries at
 * once): counted in {@link #dropped}, kept in the slab as pages L3 lacks (evictable). One whose turn comes after
 * another store was attached is written to that one.
 *
 * <p>Thread-safe.
 */
final class WriteBehind {
    private static final System.Logger LOG = System.getLogger(WriteBehind.class.getName());
    private static final int BATCH = 128;
    private final RateLimitedLog corruptLog =
            new RateLimitedLog(LOG, System.Logger.Level.WARNING, Duration.ofSeconds(10));
    /** Put in the queue to wake the thread (a clear ended); not a page. */
    @SuppressWarnings("NullAway") // no key, which every page has: a sentinel, only compared by identity
    private static final SlabPage WAKE = new SlabPage(null, -1, -1, 0, 0);

    private static final long FIRST_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final long MAX_BACKOFF_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final long STOPPING_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    /** How many unwritten pages a shutdown names, and how many given-up pages are remembered for /health. */
    static final int NAMED_PAGES = 100;

    /** A page waiting for its next try. */
    private record Retry(SlabPage entry, long dueNanos) {}

    private final SlabCache cache;
    private final int maxTries;
    private final LinkedBlockingQueue<SlabPage> queue = new LinkedBlockingQueue<>();
    /** Pages whose last try failed, soonest due first; taken by the write-behind thread only, read by close. */
    private final PriorityBlockingQueue<Retry> retries =
            new PriorityBlockingQueue<>(16, Comparator.comparingLong(Retry::dueNanos));
    /** Pages held back while a clear covers them, in the order they came; see {@link #write}. */
    private final ConcurrentLinkedQueue<SlabPage> heldBack = new ConcurrentLinkedQueue<>();
    /** {@link L3Clears#ended} when the held-back pages were last looked at; write-behind thread only. */
    private long clearsSeen;
    /** Held-back pages to look at again since a clear ended; write-behind thread only. */
    private int recheck;
    /** The batch being written, for close to name. */
    private volatile List<SlabPage> inFlight = List.of();

    private final AtomicInteger pending = new AtomicInteger();
    private final Object progress = new Object();
    /** Held while a batch is written; see {@link #awaitBatchInFlight}. */
    private final ReentrantLock writing = new ReentrantLock();

    private final RateLimitedLog failureLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));
    /** The last pages given up, newest last, for /health. */
    private final ArrayDeque<String> abandonedNames = new ArrayDeque<>();

    private final Thread thread;
    /** Run at the start of each round when set: how tests make a round fail. Null in service. */
    volatile @Nullable Runnable faultForTests;
    /** Rounds of the loop that failed with an unexpected throwable (and were survived). */
    final LongAdder loopFailures = new LongAdder();

    final LongAdder written = new LongAdder();
    /** Failed tries, counted per page. */
    final LongAdder failures = new LongAdder();

    final LongAdder abandoned = new LongAdder();
    /** Pages not written because the store was detached before their turn. */
    final LongAdder dropped = new LongAdder();

    private volatile boolean stopping;
    private volatile boolean stopped;

    WriteBehind(SlabCache cache, int maxTries) {
        this.cache = cache;
        this.maxTries = maxTries;
        this.thread = Threads.start("server-write-behind", this::run);
    }

    void enqueue(SlabPage e) {
        pending.incrementAndGet();
        queue.add(e);
    }

    /** Pages put and not yet in L3 (nor given up). */
    int pendingPages() {
        return pending.get();
    }

    /** Pages given up since the daemon started: acknowledged, and not in L3. */
    long abandonedPages() {
        return abandoned.sum();
    }

    /** A line for /health when pages were given up, else null. */
    @Nullable
    String degraded() {
        long n = abandoned.sum();
        if (n == 0) {
            return null;
        }
        synchronized (abandonedNames) {
            return "degraded: " + n + " acknowledged pages could not be written to the L3 store (the daemon's log says "
                    + "why); the last: " + String.join(", ", abandonedNames);
        }
    }

    /** A clear has ended: pages held back may be written now. */
    void wake() {
        queue.add(WAKE);
    }

    /** Waits up to {@code millis} for a batch to finish; true if one did. */
    boolean awaitProgress(long millis) {
        synchronized (progress) {
            long before = written.sum() + abandoned.sum() + dropped.sum();
            try {
                progress.wait(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return written.sum() + abandoned.sum() + dropped.sum() > before;
        }
    }

    /**
     * Waits (up to the deadline) for the batch being written, if any, to finish. A page removed from the slab before
     * this call is then either skipped by later batches or, if a batch was already writing it, deleted from L3 again
     * by that batch: after this returns, a delete or clear of L3 is not undone by a write that raced it.
     */
    void awaitBatchInFlight(Deadline deadline) throws InterruptedException {
        if (writing.tryLock(Math.max(0, deadline.remainingNanos()), TimeUnit.NANOSECONDS)) {
            writing.unlock();
        }
    }

    private void run() {
        while (!stopped && (!stopping || pending.get() > 0)) {
            try {
                Runnable fault = faultForTests;
                if (fault != null) {
                    fault.run();
                }
                List<SlabPage> batch = nextBatch();
                if (batch.isEmpty()) {
                    continue;
                }
                writing.lock();
                inFlight = batch;
                try {
                    write(batch);
                } finally {
                    inFlight = List.of();
                    writing.unlock();
                }
            } catch (InterruptedException e) {
                // closing: the loop's condition decides
            } catch (Throwable t) {
                // A bug, or a store breaking its contract: the thread lives on (a dead write-behind would freeze the
                // slab full of unwritten pages), and the failure is counted and shows in /health.
                loopFailures.increment();
                cache.health.loopFailed("write-behind", t);
                LOG.log(Level.ERROR, "write-behind: unexpected failure; going on", t);
            }
        }
    }

    /** Retries that are due, then fresh pages; waits up to 100 ms for either. */
    private List<SlabPage> nextBatch() throws InterruptedException {
        List<SlabPage> batch = new ArrayList<>();
        long ended = cache.clears.ended();
        if (ended != clearsSeen) {
            clearsSeen = ended;
            recheck = heldBack.size();
        }
        // A clear ended: the pages held back until then go first (those another clear still covers are held back
        // again, behind the ones still to be looked at).
        for (SlabPage e; batch.size() < BATCH && recheck > 0 && (e = heldBack.poll()) != null; recheck--) {
            batch.add(e);
        }
        if (!batch.isEmpty()) {
            return batch;
        }
        long now = System.nanoTime();
        boolean noStore = !cache.l3.attached(); // retries are dropped at once, not when due
        while (batch.size() < BATCH
                && !retries.isEmpty()
                && (noStore || retries.peek().dueNanos() - now <= 0)) {
            batch.add(retries.poll().entry());
        }
        if (batch.isEmpty()) {
            long waitNanos = retries.isEmpty()
                    ? TimeUnit.MILLISECONDS.toNanos(100)
                    : Math.min(
                            TimeUnit.MILLISECONDS.toNanos(100),
                            Math.max(0, retries.peek().dueNanos() - now));
            SlabPage first = queue.poll(waitNanos, TimeUnit.NANOSECONDS);
            if (first == null || first == WAKE) {
                return batch;
            }
            batch.add(first);
        }
        queue.drainTo(batch, BATCH - batch.size());
        batch.removeIf(e -> e == WAKE);
        return batch;
    }

    private void write(List<SlabPage> batch) {
        List<SlabPage> live = new ArrayList<>();
        List<StoreKey> keys = new ArrayList<>();
        List<MemorySegment> pages = new ArrayList<>();
        for (SlabPage e : batch) {
            if (!e.dirty || e.removed) {
                pending.decrementAndGet(); // deleted before it was written: nothing to do
                continue;
            }
            // Under the lock that a clear's L3 part waits for before it starts: a page a clear covers is either
            // written before that clear runs, or held back here.
            if (cache.clears.holds(e.key)) {
                heldBack.add(e);
                continue;
            }
            cache.pages.retain(e);
            MemorySegment bytes = cache.space.bytes(e);
            // Damaged slab bytes must not reach L3 under a fresh, valid checksum: checked here, where one pass over
            // the page costs little next to the store's write. It is also where the body of a page PUT unchecked is
            // checked first, when there is an L3.
            if (PageChecksum.of(bytes) != e.crc) {
                if (cache.pages.discardCorrupt(e)) {
                    cache.counters.corruptPages.increment();
                    corruptLog.log("the slab page " + e.key + " fails its CRC-32C (damaged in memory since it was "
                            + "stored, or on its way in by a PUT flagged UNCHECKED): removed, not written to L3");
                }
                pending.decrementAndGet();
                cache.pages.release(e);
                continue;
            }
            live.add(e);
            keys.add(e.key);
            pages.add(bytes);
        }
        if (live.isEmpty()) {
            return;
        }
        PageStore store = cache.l3.acquire();
        if (store == null) {
            dropAll(live);
            return;
        }
        try {
            write(store, live, keys, pages);
        } finally {
            cache.l3.release(store);
        }
    }

    /** The store was detached: {@code live} will not reach L3. */
    private void dropAll(List<SlabPage> live) {
        for (SlabPage e : live) {
            cache.pages.givenUp(e);
            pending.decrementAndGet();
            dropped.increment();
            cache.pages.release(e);
        }
        synchronized (progress) {
            progress.notifyAll();
        }
    }

    private void write(PageStore store, List<SlabPage> live, List<StoreKey> keys, List<MemorySegment> pages) {
        BatchResult r = null;
        String batchFailure = null;
        try {
            r = store.put(PageBatch.of(keys, pages), Deadline.after(Duration.ofSeconds(30)))
                    .get(60, TimeUnit.SECONDS);
            if (r.size() != live.size()) { // a store breaking its contract: a failed batch, retried
                batchFailure = "the store answered " + r.size() + " statuses for " + live.size() + " pages";
                r = null;
            }
        } catch (Throwable t) {
            batchFailure = t.toString();
        }
        List<StoreKey> deletedMeanwhile = new ArrayList<>();
        for (int i = 0; i < live.size(); i++) {
            SlabPage e = live.get(i);
            if (e.removed) {
                deletedMeanwhile.add(e.key); // deleted while being written: L3 must not keep it
                pending.decrementAndGet();
            } else if (r != null && r.status(i).isSuccess()) {
                cache.pages.writtenBehind(e);
                cache.events.writtenBehind(e.key);
                pending.decrementAndGet();
                written.increment();
                cache.health.storeWrote();
            } else {
                String cause = r == null
                        ? Checks.checkNotNull(batchFailure, "the failure of a put with no result")
                        : r.status(i) + r.detail(i).map(d -> ": " + d).orElse("");
                failed(e, cause);
            }
            cache.pages.release(e);
        }
        if (!deletedMeanwhile.isEmpty()) {
            try {
                store.delete(deletedMeanwhile, Deadline.after(Duration.ofSeconds(30)))
                        .get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                LOG.log(
                        Level.WARNING,
                        "could not delete " + deletedMeanwhile.size() + " pages deleted while being written "
                                + "behind: " + e);
            }
        }
        synchronized (progress) {
            progress.notifyAll();
        }
    }

    /** A try of {@code e} failed: retry it later, or give it up after the last try. */
    private void failed(SlabPage e, String cause) {
        failures.increment();
        cache.health.storeFailed(cause);
        e.writeTries++;
        if (stopping) {
            // Shutting down: keep trying, briefly apart, until close's timeout; close names what is left.
            retries.add(new Retry(e, System.nanoTime() + STOPPING_RETRY_NANOS));
            failureLog.log("write-behind of page " + e.key + " to the L3 store failed while shutting down (try "
                    + e.writeTries + "): " + cause);
            return;
        }
        if (e.writeTries < maxTries) {
            long backoff = Math.min(MAX_BACKOFF_NANOS, FIRST_BACKOFF_NANOS << Math.min(20, e.writeTries - 1));
            retries.add(new Retry(e, System.nanoTime() + backoff));
            failureLog.log("write-behind of page " + e.key + " to the L3 store failed (try " + e.writeTries + " of "
                    + maxTries + ", next in " + TimeUnit.NANOSECONDS.toMillis(backoff) + " ms): " + cause);
            return;
        }
        LOG.log(
                Level.ERROR,
                "gave up writing page " + e.key + " (namespace " + e.key.namespace() + ") to the L3 store "
                        + "after " + maxTries + " tries: " + cause
                        + "; it was acknowledged and is only in the host slab until "
                        + "evicted");
        cache.pages.givenUp(e);
        synchronized (abandonedNames) {
            if (abandonedNames.size() == NAMED_PAGES) {
                abandonedNames.poll();
            }
            abandonedNames.add(e.key.toString());
        }
        pending.decrementAndGet();
        abandoned.increment();
    }

    /**
     * Waits (up to {@code timeout}) until every pending page is written, then stops the thread; logs at ERROR the
     * acknowledged pages that did not reach L3, by name.
     */
    void close(Duration timeout) {
        stopping = true;
        List<Retry> backingOff = new ArrayList<>();
        retries.drainTo(backingOff);
        long now = System.nanoTime();
        backingOff.forEach(r -> retries.add(new Retry(r.entry(), now))); // no more backoff: try them now
        try {
            thread.join(timeout.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        stopped = true;
        thread.interrupt();
        try {
            thread.join(2_000); // a batch in flight is named below if it has not finished by then
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        List<SlabPage> left = new ArrayList<>(inFlight);
        left.addAll(queue);
        left.addAll(heldBack);
        left.removeIf(e -> e == WAKE);
        retries.forEach(retry -> left.add(retry.entry()));
        List<String> unwritten = new ArrayList<>();
        for (SlabPage e : left) {
            if (e.dirty && !e.removed) {
                unwritten.add(e.key.toString());
            }
        }
        if (!unwritten.isEmpty()) {
            LOG.log(
                    Level.ERROR,
                    unwritten.size() + " acknowledged pages were not written to the L3 store before the "
                            + "shutdown timeout (" + timeout.toMillis() + " ms) and are lost with the slab: "
                            + String.join(", ", unwritten.subList(0, Math.min(NAMED_PAGES, unwritten.size())))
                            + (unwritten.size() > NAMED_PAGES ? ", ..." : ""));
        }
        if (abandoned.sum() > 0) {
            LOG.log(
                    Level.ERROR,
                    abandoned.sum() + " acknowledged pages were given up by the write-behind while the "
                            + "daemon ran (logged when each was given up) and did not reach the L3 store");
        }
    }
}
