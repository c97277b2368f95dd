package io.hicache.testkit;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.store.StoreStats;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * A page store that answers late, by a cost per call and per page, in front of another: an L3 as slow as the file
 * store at small pages (one open and rename per page), or a remote one, for tests and the replay's slow-L3 row. The
 * delays are waits, not work: calls made at once wait at once. Thread-safe; owns and closes the store in front of
 * which it stands.
 */
public final class SlowPageStore implements PageStore {
    private final PageStore inner;
    private final long perCallMicros;
    private final long perPageMicros;

    /** {@code inner} behind {@code perCallMicros} per call plus {@code perPageMicros} per page of the call. */
    public SlowPageStore(PageStore inner, long perCallMicros, long perPageMicros) {
        this.inner = inner;
        this.perCallMicros = perCallMicros;
        this.perPageMicros = perPageMicros;
    }

    private <T> CompletableFuture<T> late(int pages, Supplier<CompletableFuture<T>> call) {
        long micros = perCallMicros + perPageMicros * pages;
        return CompletableFuture.supplyAsync(() -> null, CompletableFuture.delayedExecutor(micros, TimeUnit.MICROSECONDS))
                .thenCompose(ignored -> call.get());
    }

    @Override
    public String name() {
        return "slow";
    }

    @Override
    public String location() {
        return inner.location() + ", " + perCallMicros + " us per call and " + perPageMicros + " us per page late";
    }

    @Override
    public StoreCapabilities capabilities() {
        return inner.capabilities();
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return late(0, () -> inner.leadingHits(keys, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return late(targets.size(), () -> inner.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return late(sources.size(), () -> inner.put(sources, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return late(keys.size(), () -> inner.delete(keys, deadline));
    }

    @Override
    public CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        return late(0, () -> inner.clear(namespace, deadline));
    }

    @Override
    public CompletableFuture<Void> clearAll(Deadline deadline) {
        return late(0, () -> inner.clearAll(deadline));
    }

    @Override
    public StoreStats stats() {
        return inner.stats();
    }

    @Override
    public void close() {
        inner.close();
    }
}
