package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * The L3 part of CLEAR and CLEAR_ALL (docs/protocol.md §3), in the background: one clear at a time, in the order
 * asked, on the thread {@code hicache-server-l3-clear}, so that a clear answers by its deadline however long L3
 * takes (a file store of 100,000 namespace folders takes minutes), and no request thread waits for it.
 *
 * <p>A clear asked while another that covers it is queued or running joins that one instead of starting its own (a
 * CLEAR_ALL covers everything, a CLEAR its namespace), and is answered when it ends. That is exact because, from the
 * moment a clear is queued until it ends, pages it covers are not written to L3 ({@link #holds}: the write-behind
 * keeps them in the slab, and a page read from L3 is served without being promoted into the slab): L3 gains no page
 * of it meanwhile, so when it ends L3 holds none that was there when any of the clears it answers was asked.
 *
 * <p>Each clear may run {@link #LIMIT} at most (a store that keeps its deadline stops then, and the clear fails).
 * Thread-safe.
 */
final class L3Clears {
    private static final System.Logger LOG = System.getLogger(L3Clears.class.getName());
    /** The longest an L3 clear may run in the background. */
    static final Duration LIMIT = Duration.ofHours(1);

    /** One L3 clear: of namespace {@code ns}, or of all ({@code ns} null), in {@code store}. */
    static final class Job {
        /** Null: every namespace. */
        final @Nullable Namespace ns;

        final PageStore store;
        /** Completes when the clear has ended: normally if L3 is clear, else with its failure. */
        final CompletableFuture<Void> done = new CompletableFuture<>();

        private final long queuedNanos = System.nanoTime();
        private volatile long startedNanos;
        private final AtomicBoolean over = new AtomicBoolean();

        private Job(@Nullable Namespace ns, PageStore store) {
            this.ns = ns;
            this.store = store;
        }

        boolean covers(Namespace n) {
            return ns == null || ns.equals(n);
        }

        /** Where it stands, for an answer's message. */
        String describe() {
            long started = startedNanos;
            return started == 0
                    ? "queued behind another L3 clear for " + millisSince(queuedNanos) + " ms"
                    : "running for " + millisSince(started) + " ms";
        }

        private static long millisSince(long nanos) {
            return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanos);
        }
    }

    private final SlabCache cache;
    private final ExecutorService runner = Executors.newSingleThreadExecutor(Threads.factory("server-l3-clear"));
    /** Clears queued or running, in order. */
    private final CopyOnWriteArrayList<Job> active = new CopyOnWriteArrayList<>();
    /** Counts clears ended (and the end of holding, at close): a change tells the write-behind to look again. */
    private final AtomicLong ended = new AtomicLong();

    private volatile boolean released;

    L3Clears(SlabCache cache) {
        this.cache = cache;
    }

    /**
     * Whether {@code key}'s page must not reach L3 now (a clear that covers it is queued or running): the
     * write-behind keeps it in the slab, and a read from L3 does not promote it.
     */
    boolean holds(StoreKey key) {
        if (released || active.isEmpty()) {
            return false;
        }
        for (Job j : active) {
            if (j.covers(key.namespace())) {
                return true;
            }
        }
        return false;
    }

    /** A number that changes when a clear ends: pages held back may go to L3 again. */
    long ended() {
        return ended.get();
    }

    /** Clears queued or running now. */
    int active() {
        return active.size();
    }

    /**
     * The L3 clear of {@code ns} (null: every namespace) in {@code store}, which the caller acquired and this takes
     * over: a clear of that store queued or running that covers it, or else a new one, queued behind the others.
     */
    synchronized Job submit(@Nullable Namespace ns, PageStore store) {
        for (Job j : active) {
            if (j.store == store && (j.ns == null || ns != null && j.ns.equals(ns))) {
                cache.l3.release(store);
                return j;
            }
        }
        Job j = new Job(ns, store);
        active.add(j);
        try {
            runner.execute(() -> run(j));
        } catch (RejectedExecutionException e) {
            end(j, new IllegalStateException("the daemon is shutting down"));
        }
        return j;
    }

    private void run(Job j) {
        j.startedNanos = System.nanoTime();
        Deadline deadline = Deadline.after(LIMIT);
        Exception failure = null;
        try {
            // A batch written while the clear was queued wrote pages the clear does not cover, or that were put
            // before it: wait for it, so that the store's clear comes after.
            cache.writeBehind.awaitBatchInFlight(deadline);
            (j.ns == null ? j.store.clearAll(deadline) : j.store.clear(j.ns, deadline))
                    .get(Waits.l3Millis(deadline), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            failure = e.getCause() instanceof Exception cause ? cause : e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failure = e;
        } catch (Exception e) {
            failure = e;
        }
        end(j, failure);
    }

    private void end(Job j, @Nullable Exception failure) {
        if (!j.over.compareAndSet(false, true)) {
            return;
        }
        cache.l3.release(j.store);
        synchronized (this) {
            active.remove(j);
        }
        ended.incrementAndGet();
        cache.events.cleared(); // after L3's clear (also a failed one, which may have dropped pages)
        cache.writeBehind.wake();
        if (failure != null) {
            LOG.log(
                    Level.WARNING,
                    "the L3 clear of " + (j.ns == null ? "every namespace" : "namespace " + j.ns)
                            + " failed; L3 may still hold pages of it",
                    failure);
            j.done.completeExceptionally(failure);
        } else {
            j.done.complete(null);
        }
    }

    /**
     * Waits up to {@code timeout} for the clears queued or running, then stops holding pages back (the write-behind
     * writes them, also where a clear still runs: logged) and stops the thread.
     */
    void close(Duration timeout) {
        runner.shutdown();
        long end = System.nanoTime() + timeout.toNanos();
        for (Job j : active) {
            try {
                j.done.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (Exception e) {
                // failed (logged), or still running: below
            }
        }
        if (!active.isEmpty()) {
            LOG.log(
                    Level.ERROR,
                    active.size() + " L3 clears had not ended when the daemon stopped (the first "
                            + active.get(0).describe()
                            + "); pages of their namespaces put meanwhile are written to L3 now, "
                            + "where a clear still running may remove them");
        }
        released = true;
        ended.incrementAndGet();
        cache.writeBehind.wake();
        runner.shutdownNow();
        for (Job j : active) {
            if (j.startedNanos == 0) {
                end(j, new IllegalStateException("the daemon stopped before this L3 clear began"));
            }
        }
    }
}
