package io.hicache.testkit;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
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
public final class SlowPageStore extends ForwardingPageStore {
    private final long perCallMicros;
    private final long perPageMicros;

    /** {@code inner} behind {@code perCallMicros} per call plus {@code perPageMicros} per page of the call. */
    public SlowPageStore(PageStore inner, long perCallMicros, long perPageMicros) {
        super(inner);
        this.perCallMicros = perCallMicros;
        this.perPageMicros = perPageMicros;
    }

    private <T> CompletableFuture<T> late(int pages, Supplier<CompletableFuture<T>> call) {
        long micros = perCallMicros + perPageMicros * pages;
        return CompletableFuture.supplyAsync(
                        () -> null, CompletableFuture.delayedExecutor(micros, TimeUnit.MICROSECONDS))
                .thenCompose(ignored -> call.get());
    }

    @Override
    public String name() {
        return "slow";
    }

    @Override
    public String location() {
        return delegate.location() + ", " + perCallMicros + " us per call and " + perPageMicros + " us per page late";
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return late(0, () -> delegate.leadingHits(keys, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return late(targets.size(), () -> delegate.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return late(sources.size(), () -> delegate.put(sources, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return late(keys.size(), () -> delegate.delete(keys, deadline));
    }

    @Override
    public CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        return late(0, () -> delegate.clear(namespace, deadline));
    }

    @Override
    public CompletableFuture<Void> clearAll(Deadline deadline) {
        return late(0, () -> delegate.clearAll(deadline));
    }
}
