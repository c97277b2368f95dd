package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.store.StoreStats;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * The cache's page store with each call's latency, from the call to its future's completion (answered or failed),
 * observed in a histogram per operation. Thread-safe as the store it wraps; closing it closes that store.
 */
final class TimedPageStore implements PageStore {
    private final PageStore store;
    private final DistributionDataPoint leadingHits;
    private final DistributionDataPoint get;
    private final DistributionDataPoint put;
    private final DistributionDataPoint delete;

    TimedPageStore(PageStore store, CacheMetricsExport export) {
        this.store = store;
        this.leadingHits = export.storeSeconds("leading_hits");
        this.get = export.storeSeconds("get");
        this.put = export.storeSeconds("put");
        this.delete = export.storeSeconds("delete");
    }

    private static <T> CompletableFuture<T> timed(DistributionDataPoint latency, Supplier<CompletableFuture<T>> call) {
        long start = System.nanoTime();
        CompletableFuture<T> answer = call.get();
        answer.whenComplete((v, e) -> latency.observe((System.nanoTime() - start) / 1e9));
        return answer;
    }

    /** The store it times, as it was given. */
    PageStore inner() {
        return store;
    }

    @Override
    public String name() {
        return store.name();
    }

    @Override
    public String location() {
        return store.location();
    }

    @Override
    public StoreCapabilities capabilities() {
        return store.capabilities();
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return timed(leadingHits, () -> store.leadingHits(keys, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return timed(get, () -> store.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return timed(put, () -> store.put(sources, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return timed(delete, () -> store.delete(keys, deadline));
    }

    @Override
    public CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        return store.clear(namespace, deadline);
    }

    @Override
    public CompletableFuture<Void> clearAll(Deadline deadline) {
        return store.clearAll(deadline);
    }

    @Override
    public StoreStats stats() {
        return store.stats();
    }

    @Override
    public void close() {
        store.close();
    }

    @Override
    public String toString() {
        return store.toString();
    }
}
