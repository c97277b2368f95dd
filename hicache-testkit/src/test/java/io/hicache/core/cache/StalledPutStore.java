package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.store.StoreStats;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * An in-memory page store whose puts do not start until {@link #release()}: an L3 that has fallen far behind, so
 * that uploads queue up and hold their host pages. Thread-safe; closing it closes the memory store.
 */
final class StalledPutStore implements PageStore {
    private final InMemoryPageStore inner = new InMemoryPageStore(1L << 30);
    private final CompletableFuture<Void> gate = new CompletableFuture<>();

    /** Lets every put, waiting or to come, through. */
    void release() {
        gate.complete(null);
    }

    @Override
    public String name() {
        return "stalled";
    }

    @Override
    public String location() {
        return "memory, puts stalled";
    }

    @Override
    public StoreCapabilities capabilities() {
        return inner.capabilities();
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return inner.leadingHits(keys, deadline);
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return inner.get(targets, deadline);
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return gate.thenCompose(ignored -> inner.put(sources, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return inner.delete(keys, deadline);
    }

    @Override
    public CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        return inner.clear(namespace, deadline);
    }

    @Override
    public CompletableFuture<Void> clearAll(Deadline deadline) {
        return inner.clearAll(deadline);
    }

    @Override
    public StoreStats stats() {
        return inner.stats();
    }

    @Override
    public void close() {
        release();
        inner.close();
    }
}
