package io.hicache.core.cache;

import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * A named background thread ({@code hicache-NAME}), or several, working through a bounded queue. Work that does not fit the queue
 * is refused (the caller skips it and counts that), so a slow store never stalls the engine. The thread never dies
 * on a failed item: it counts the failure under the loop's name, logs it and goes on. A loop may be guarded by a
 * lock: its thread runs each item holding it, and a caller holding it may run the queued items itself
 * ({@link #runQueuedHere}), including the one the thread has taken and waits to lock for. Work already taken on
 * (the next step of an item whose store call answered) comes back through {@link #resume}, past the bound: it is not
 * new work, and refusing it would lose what the item holds. Closing lets queued work run for the time given, then
 * interrupts the threads and drops what is still queued, so that a hung store cannot keep them alive past it.
 * Thread-safe; the cache closes it.
 */
final class Loop<T> implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Loop.class.getName());

    private final String name;
    private final int capacity;
    /** Unbounded: {@link #offer} keeps new work to {@link #capacity}, {@link #resume} may go past it. */
    private final BlockingQueue<T> queue = new LinkedBlockingQueue<>();

    private final Consumer<T> work;
    private final CacheMetrics metrics;
    private final List<Thread> threads;
    /** Held while an item runs, or null. */
    private final @Nullable Lock guard;
    /**
     * The item the thread has taken and waits for the guard to run: a caller holding the guard runs it instead, or
     * the two would wait for each other (the caller for the item's effect, the thread for the guard).
     */
    private final AtomicReference<T> inHand = new AtomicReference<>();

    private volatile boolean closed;
    /** Set when closing has waited long enough: the threads take no more work. */
    private volatile boolean stopped;

    Loop(String name, int capacity, Consumer<T> work, CacheMetrics metrics) {
        this(name, capacity, work, metrics, null, 1);
    }

    /** A loop whose items run holding {@code guard} (null: none). */
    Loop(String name, int capacity, Consumer<T> work, CacheMetrics metrics, @Nullable Lock guard) {
        this(name, capacity, work, metrics, guard, 1);
    }

    /**
     * A loop of {@code threadCount} threads ({@code hicache-NAME-0}, ...; one is {@code hicache-NAME}) taking work
     * from one queue, for work that waits more than it computes. A guarded loop has one thread.
     */
    Loop(String name, int capacity, Consumer<T> work, CacheMetrics metrics, @Nullable Lock guard, int threadCount) {
        Checks.checkPositive(threadCount, "threadCount");
        Checks.requireArgument(guard == null || threadCount == 1, "a guarded loop has one thread");
        this.name = name;
        this.guard = guard;
        this.capacity = Checks.checkPositive(capacity, "capacity");
        this.work = work;
        this.metrics = metrics;
        List<Thread> started = new ArrayList<>(threadCount);
        for (int i = 0; i < threadCount; i++) {
            started.add(Threads.start(threadCount == 1 ? name : name + "-" + i, this::run));
        }
        this.threads = List.copyOf(started);
    }

    /**
     * Where this loop's threads are now, for a log line that must say why work is not getting done: each thread's
     * name, state and its innermost {@code frames} frames.
     */
    String whereThreadsAre(int frames) {
        StringBuilder b = new StringBuilder();
        for (Thread t : threads) {
            b.append(b.isEmpty() ? "" : "; ").append(t.getName()).append(' ').append(t.getState());
            StackTraceElement[] stack = t.getStackTrace();
            for (int i = 0; i < Math.min(frames, stack.length); i++) {
                b.append(i == 0 ? " at " : " < ")
                        .append(stack[i].getClassName()
                                .substring(stack[i].getClassName().lastIndexOf('.') + 1))
                        .append('.')
                        .append(stack[i].getMethodName())
                        .append(':')
                        .append(stack[i].getLineNumber());
            }
        }
        return b.toString();
    }

    /** Queues {@code item}; false (and counted) when the queue is full or the loop closed. */
    boolean offer(T item) {
        if (closed) {
            return false;
        }
        if (queue.size() >= capacity) {
            metrics.fail(name + ": queue full");
            return false;
        }
        queue.add(item);
        return true;
    }

    /** Queues the next step of work this loop took on earlier, whatever the bound; false when the loop stopped. */
    boolean resume(T item) {
        if (stopped) {
            return false;
        }
        queue.add(item);
        return true;
    }

    /**
     * Queues {@code item}, waiting for room: for work that must not be dropped (a copy's completion). False when the
     * loop closed, so the caller runs it itself.
     */
    boolean put(T item) {
        try {
            while (!closed) {
                synchronized (queue) { // one waiting producer at a time past the bound
                    if (queue.size() < capacity) {
                        queue.add(item);
                        return true;
                    }
                }
                Thread.sleep(1);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return false;
    }

    /** Whether an {@link #offer} now would be taken (with one thread offering, it stays true until it offers). */
    boolean hasRoom() {
        return !closed && queue.size() < capacity;
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

    private void run() {
        while (!stopped && (!closed || !queue.isEmpty())) {
            T item;
            try {
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
        Lock guard = Checks.checkNotNull(this.guard, "a guarded loop's lock");
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

    /**
     * Lets the queued work finish for most of {@code waitMillis}, then interrupts the threads (a store call they wait
     * on is given up) and waits for them to end within the rest; what is still queued is dropped.
     */
    void close(long waitMillis) {
        closed = true;
        long now = System.nanoTime();
        long end = now + TimeUnit.MILLISECONDS.toNanos(waitMillis);
        long interruptAt = end - TimeUnit.MILLISECONDS.toNanos(Math.min(500, waitMillis / 5));
        joinUntil(interruptAt);
        stopped = true;
        for (Thread thread : threads) {
            thread.interrupt();
        }
        joinUntil(Math.max(
                end, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50))); // an interrupted thread ends soon

        for (Thread thread : threads) {
            if (thread.isAlive()) {
                LOG.log(
                        Level.WARNING,
                        thread.getName() + " is still running after " + waitMillis + " ms of closing: "
                                + "its current task does not answer interrupts");
            }
        }
    }

    private void joinUntil(long endNanos) {
        for (Thread thread : threads) {
            try {
                thread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(endNanos - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Whether every thread of the loop has ended: for tests. */
    boolean ended() {
        return threads.stream().noneMatch(Thread::isAlive);
    }

    @Override
    public void close() {
        close(30_000);
    }
}
