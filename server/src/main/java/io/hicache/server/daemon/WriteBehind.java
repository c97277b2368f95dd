package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Writes pages put into the daemon's slab behind to its L3 store, on the thread {@code hicache-server-write-behind}:
 * in batches of up to 128, straight from the slab. A page stays in the slab (and is not evictable) until L3 has it;
 * a failed write is retried after a pause, counted and logged, and the thread goes on. Closing waits (up to its
 * timeout) until every page put has been written: a graceful shutdown loses no acknowledged write.
 *
 * <p>Thread-safe.
 */
final class WriteBehind {
    private static final System.Logger LOG = System.getLogger(WriteBehind.class.getName());
    private static final int BATCH = 128;

    private final SlabCache cache;
    private final LinkedBlockingQueue<SlabCache.Entry> queue = new LinkedBlockingQueue<>();
    private final AtomicInteger pending = new AtomicInteger();
    private final Object progress = new Object();
    /** Held while a batch is written; see {@link #awaitBatchInFlight}. */
    private final ReentrantLock writing = new ReentrantLock();
    private final Thread thread;
    final LongAdder written = new LongAdder();
    final LongAdder failures = new LongAdder();
    private volatile boolean stopping;
    private volatile boolean abandoned;

    WriteBehind(SlabCache cache) {
        this.cache = cache;
        this.thread = Threads.start("server-write-behind", this::run);
    }

    void enqueue(SlabCache.Entry e) {
        pending.incrementAndGet();
        queue.add(e);
    }

    /** Pages put and not yet in L3. */
    int pendingPages() {
        return pending.get();
    }

    /** Waits up to {@code millis} for a batch to finish; true if one did. */
    boolean awaitProgress(long millis) {
        synchronized (progress) {
            long before = written.sum();
            try {
                progress.wait(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return written.sum() > before;
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
        while (!abandoned && (!stopping || pending.get() > 0)) {
            List<SlabCache.Entry> batch = new ArrayList<>();
            try {
                SlabCache.Entry first = queue.poll(100, TimeUnit.MILLISECONDS);
                if (first == null) {
                    continue;
                }
                batch.add(first);
                queue.drainTo(batch, BATCH - 1);
                writing.lock();
                try {
                    write(batch);
                } finally {
                    writing.unlock();
                }
            } catch (InterruptedException e) {
                continue;
            } catch (Throwable t) {
                failures.increment();
                LOG.log(Level.WARNING, "write-behind failed; retrying", t);
                batch.forEach(queue::add);
                pause();
            }
        }
    }

    private void write(List<SlabCache.Entry> batch) {
        PageStore store = cache.l3.orElseThrow();
        List<SlabCache.Entry> live = new ArrayList<>();
        List<StoreKey> keys = new ArrayList<>();
        List<MemorySegment> pages = new ArrayList<>();
        for (SlabCache.Entry e : batch) {
            if (!e.dirty || e.removed) {
                pending.decrementAndGet(); // deleted before it was written: nothing to do
                continue;
            }
            cache.retain(e);
            live.add(e);
            keys.add(e.key);
            pages.add(cache.bytes(e));
        }
        if (live.isEmpty()) {
            return;
        }
        BatchResult r = null;
        try {
            r = store.put(PageBatch.of(keys, pages), Deadline.after(Duration.ofSeconds(30))).get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            failures.increment();
            LOG.log(Level.WARNING, "write-behind of " + live.size() + " pages failed; retrying: " + e);
        }
        boolean retry = false;
        List<StoreKey> deletedMeanwhile = new ArrayList<>();
        for (int i = 0; i < live.size(); i++) {
            SlabCache.Entry e = live.get(i);
            if (e.removed) {
                deletedMeanwhile.add(e.key); // deleted while being written: L3 must not keep it
                pending.decrementAndGet();
            } else if (r != null && r.status(i).isSuccess()) {
                cache.writtenBehind(e);
                pending.decrementAndGet();
                written.increment();
            } else {
                queue.add(e);
                retry = true;
            }
            cache.release(e);
        }
        if (!deletedMeanwhile.isEmpty()) {
            try {
                store.delete(deletedMeanwhile, Deadline.after(Duration.ofSeconds(30))).get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                LOG.log(Level.WARNING, "could not delete " + deletedMeanwhile.size() + " pages deleted while being written "
                        + "behind: " + e);
            }
        }
        synchronized (progress) {
            progress.notifyAll();
        }
        if (retry) {
            failures.increment();
            pause();
        }
    }

    private static void pause() {
        try {
            Thread.sleep(100);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Waits (up to {@code timeout}) until every pending page is written, then stops the thread. */
    void close(Duration timeout) {
        stopping = true;
        try {
            thread.join(timeout.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (pending.get() > 0) {
            LOG.log(Level.ERROR, pending.get() + " pages were not written to the L3 store before shutdown timed out");
        }
        abandoned = true;
        thread.interrupt();
    }
}
