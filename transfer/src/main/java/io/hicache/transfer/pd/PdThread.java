package io.hicache.transfer.pd;

import io.hicache.core.util.Threads;
import java.util.concurrent.Delayed;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The single named daemon thread on which a prefill or decode rank runs its protocol and sweeps. Thread-safe; the
 * rank that creates it closes it.
 */
final class PdThread implements AutoCloseable {
    private final ScheduledThreadPoolExecutor executor;

    PdThread(String name) {
        executor = new ScheduledThreadPoolExecutor(1, Threads.factory(name));
        executor.setRemoveOnCancelPolicy(true);
    }

    /** The executor, for scheduling and for bounded {@code submit(...).get(timeout)} calls. */
    ScheduledExecutorService executor() {
        return executor;
    }

    /** Runs {@code task} on the thread; dropped once it is closed (late messages have nobody to inform). */
    void post(Runnable task) {
        try {
            executor.execute(task);
        } catch (RejectedExecutionException closed) {
            // closed
        }
    }

    /**
     * Whether a task is due now (posted, or scheduled for a time that has come): a task that spins on the thread stops
     * when one is, so the spin never delays other work.
     */
    boolean hasDueTask() {
        return executor.getQueue().peek() instanceof Delayed head && head.getDelay(TimeUnit.NANOSECONDS) <= 0;
    }

    /** Runs {@code task} every {@code millis}. */
    void every(long millis, Runnable task) {
        executor.scheduleWithFixedDelay(task, millis, millis, TimeUnit.MILLISECONDS);
    }

    /** Stops the thread, waiting at most 5 s for the task in progress. */
    @Override
    public void close() {
        executor.shutdownNow();
        try {
            executor.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
