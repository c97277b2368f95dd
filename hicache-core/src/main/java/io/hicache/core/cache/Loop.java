package io.hicache.core.cache;

import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;

/**
 * A named background thread ({@code hicache-NAME}), or several, working through a bounded queue. Work that does not fit the queue
 * is refused (the caller skips it and counts that), so a slow store never stalls the engine. The thread never dies
 * on a failed item: it counts the failure under the loop's name, logs it and goes on. A loop may be guarded by a
 * lock: its thread runs each item holding it, and a caller holding it may run the queued items itself
 * ({@link #runQueuedHere}), including the one the thread has taken and waits to lock for. Thread-safe; the cache
 * closes it.
 */
final class Loop<T> implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Loop.class.getName());

    private final String name;
    private final BlockingQueue<T> queue;
    private final Consumer<T> work;
    private final CacheMetrics metrics;
    private final List<Thread> threads;
    /** Held while an item runs, or null. */
    private final Lock guard;
    /**
     * The item the thread has taken and waits for the guard to run: a caller holding the guard runs it instead, or
     * the two would wait for each other (the caller for the item's effect, the thread for the guard).
     */
    private final AtomicReference<T> inHand = new AtomicReference<>();
    private volatile boolean closed;
    /** Set by tests to stand for a starved thread: it takes no work while set. */
    private volatile boolean pausedForTests;

    Loop(String name, int capacity, Consumer<T> work, CacheMetrics metrics) {
        this(name, capacity, work, metrics, null, 1);
    }

    /** A loop whose items run holding {@code guard} (null: none). */
    Loop(String name, int capacity, Consumer<T> work, CacheMetrics metrics, Lock guard) {
        this(name, capacity, work, metrics, guard, 1);
    }

    /**
     * A loop of {@code threadCount} threads ({@code hicache-NAME-0}, ...; one is {@code hicache-NAME}) taking work
     * from one queue, for work that waits more than it computes. A guarded loop has one thread.
     */
    Loop(String name, int capacity, Consumer<T> work, CacheMetrics metrics, Lock guard, int threadCount) {
        Checks.checkPositive(threadCount, "threadCount");
        Checks.requireArgument(guard == null || threadCount == 1, "a guarded loop has one thread");
        this.name = name;
        this.guard = guard;
        this.queue = new ArrayBlockingQueue<>(capacity);
        this.work = work;
        this.metrics = metrics;
        List<Thread> started = new ArrayList<>(threadCount);
        for (int i = 0; i < threadCount; i++) {
            started.add(Threads.start(threadCount == 1 ? name : name + "-" + i, this::run));
        }
        this.threads = List.copyOf(started);
    }

    /** Queues {@code item}; false (and counted) when the queue is full or the loop closed. */
    boolean offer(T item) {
        if (closed) {
            return false;
        }
        if (!queue.offer(item)) {
            metrics.fail(name + ": queue full");
            return false;
        }
        return true;
    }

    /**
     * Queues {@code item}, waiting for room: for work that must not be dropped (a copy's completion). False when the
     * loop closed, so the caller runs it itself.
     */
    boolean put(T item) {
        try {
            while (!closed) {
                if (queue.offer(item, 50, TimeUnit.MILLISECONDS)) {
                    return true;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return false;
    }

    /** Whether an {@link #offer} now would be taken (with one thread offering, it stays true until it offers). */
    boolean hasRoom() {
        return !closed && queue.remainingCapacity() > 0;
    }

    /** The next queued item if there is one, taken: for work that gathers several items into one batch. */
    T pollQueued() {
        return queue.poll();
    }

    /** Items queued or taken and not yet run. */
    int depth() {
        return queue.size() + (inHand.get() != null ? 1 : 0);
    }

    /**
     * Runs the work queued now on the calling thread, as the loop would: for a caller that needs its effect at once
     * (an allocation that a finished copy would make possible) and must not wait for a starved loop thread. A
     * guarded loop's caller holds the guard.
     *
     * @return how many items ran
     */
    int runQueuedHere() {
        int ran = 0;
        T taken = inHand.getAndSet(null);
        if (taken != null) {
            runOne(taken);
            ran++;
        }
        for (T item; (item = queue.poll()) != null; ran++) {
            runOne(item);
        }
        return ran;
    }

    /** Stops (or lets go on) the loop's thread taking work, as if it were starved of CPU: for tests. */
    void pauseForTests(boolean paused) {
        pausedForTests = paused;
    }

    private void run() {
        while (!closed || !queue.isEmpty()) {
            T item;
            try {
                if (pausedForTests && !closed) {
                    Thread.sleep(1);
                    continue;
                }
                item = queue.poll(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                continue;
            }
            if (item != null) {
                if (guard == null) {
                    runOne(item);
                } else {
                    runGuarded(item);
                }
            }
        }
    }

    private void runGuarded(T item) {
        inHand.set(item);
        guard.lock();
        try {
            if (inHand.compareAndSet(item, null)) { // else a caller holding the guard ran it meanwhile
                runOne(item);
            }
        } finally {
            guard.unlock();
        }
    }

    private void runOne(T item) {
        try {
            work.accept(item);
        } catch (Throwable t) {
            metrics.fail(name + ": " + t.getClass().getSimpleName());
            LOG.log(Level.WARNING, "hicache-" + name + ": a task failed; the loop goes on", t);
        }
    }

    /** Lets the queued work finish (up to {@code waitMillis}), then stops the thread. */
    void close(long waitMillis) {
        closed = true;
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMillis);
        for (Thread thread : threads) {
            try {
                thread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (thread.isAlive()) {
                thread.interrupt();
            }
        }
    }

    @Override
    public void close() {
        close(30_000);
    }
}
