package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An in-memory page store with trouble on demand: puts that do not start until {@link #release()} (an L3 that has
 * fallen far behind, so that uploads queue up), and puts that fail ({@link #failNextPuts}). Starts released and
 * healthy. Thread-safe; closing it closes the memory store.
 */
final class TroubledPageStore extends ForwardingPageStore {
    private final InMemoryPageStore inner;

    TroubledPageStore() {
        this(new InMemoryPageStore(1L << 30));
    }

    private TroubledPageStore(InMemoryPageStore inner) {
        super(inner);
        this.inner = inner;
    }

    private volatile CompletableFuture<Void> gate = CompletableFuture.completedFuture(null);
    private final AtomicInteger failingPuts = new AtomicInteger();
    private final AtomicInteger putCalls = new AtomicInteger();

    /** Puts from now on wait until {@link #release()}. */
    TroubledPageStore stall() {
        gate = new CompletableFuture<>();
        return this;
    }

    private volatile long getDelayMillis;

    /** Reads answer {@code millis} late from now on: a store far away. */
    TroubledPageStore slowGets(long millis) {
        getDelayMillis = millis;
        return this;
    }

    /** Lets every put, waiting or to come, through. */
    void release() {
        gate.complete(null);
    }

    /** The next {@code n} put calls fail as a whole. */
    TroubledPageStore failNextPuts(int n) {
        failingPuts.set(n);
        return this;
    }

    /** Put calls so far. */
    int putCalls() {
        return putCalls.get();
    }

    /** Whether every one of {@code keys} is stored. */
    boolean holdsAll(List<StoreKey> keys) {
        return inner.leadingHits(keys, Deadline.after(Duration.ofSeconds(10))).join() == keys.size();
    }

    @Override
    public String name() {
        return "troubled";
    }

    @Override
    public String location() {
        return "memory, with trouble on demand";
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return inner.leadingHits(keys, deadline);
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        long delay = getDelayMillis;
        if (delay == 0) {
            return inner.get(targets, deadline);
        }
        return CompletableFuture.supplyAsync(
                        () -> null, CompletableFuture.delayedExecutor(delay, TimeUnit.MILLISECONDS))
                .thenCompose(ignored -> inner.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        putCalls.incrementAndGet();
        if (failingPuts.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            return CompletableFuture.failedFuture(new HiCacheException(ErrorCode.STORE_IO, "injected put failure"));
        }
        return gate.thenCompose(ignored -> inner.put(sources, deadline));
    }

    @Override
    public void close() {
        release();
        inner.close();
    }
}
