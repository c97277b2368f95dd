package io.hicache.storage.s3;

import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * Bounds the requests a store has in flight, without blocking a thread: a request beyond the bound waits in a queue
 * and starts when one ends. Requests start in the order they were submitted, so a batch's early pages (the ones a
 * prefix needs first) go out first. Thread-safe.
 */
final class RequestLimiter {
    private static final ThreadLocal<ArrayDeque<Runnable>> TRAMPOLINE = new ThreadLocal<>();

    private final int limit;
    private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
    private int running;

    RequestLimiter(int limit) {
        this.limit = limit;
    }

    /**
     * Starts {@code request} now or when a slot frees; the returned future completes as the request's does. If
     * {@code request} throws, the future fails with that.
     */
    <T> CompletableFuture<T> submit(Supplier<CompletableFuture<T>> request) {
        CompletableFuture<T> result = new CompletableFuture<>();
        Runnable start = () -> {
            CompletableFuture<T> running;
            try {
                running = request.get();
            } catch (RuntimeException | Error e) {
                running = CompletableFuture.failedFuture(e);
            }
            running.whenComplete((value, error) -> {
                release();
                if (error != null) {
                    result.completeExceptionally(error);
                } else {
                    result.complete(value);
                }
            });
        };
        boolean now;
        synchronized (this) {
            now = running < limit;
            if (now) {
                running++;
            } else {
                waiting.add(start);
            }
        }
        if (now) {
            start.run();
        }
        return result;
    }

    private void release() {
        Runnable next;
        synchronized (this) {
            next = waiting.poll();
            if (next == null) {
                running--;
            }
        }
        if (next == null) {
            return;
        }
        // A request that completes at once (its deadline passed while it waited) releases inside its own start:
        // run such chains in a loop here rather than one stack frame deeper each.
        ArrayDeque<Runnable> pending = TRAMPOLINE.get();
        if (pending != null) {
            pending.add(next);
            return;
        }
        pending = new ArrayDeque<>();
        TRAMPOLINE.set(pending);
        try {
            for (Runnable r = next; r != null; r = pending.poll()) {
                r.run();
            }
        } finally {
            TRAMPOLINE.remove();
        }
    }

    /** Requests in flight now. */
    synchronized int running() {
        return running;
    }
}
