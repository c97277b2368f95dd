package io.hicache.core.store;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.util.Checks;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A page store that hands every call to another: the base of decorators (timing, injected faults, delays), which
 * override only the calls they change. Thread-safe as the store it wraps. Closing it closes that store; a decorator
 * that must not (a view shared by several owners) overrides {@link #close}.
 */
public abstract class ForwardingPageStore implements PageStore {
    /** The store every call goes to. */
    protected final PageStore delegate;

    protected ForwardingPageStore(PageStore delegate) {
        this.delegate = Checks.checkNotNull(delegate, "delegate");
    }

    @Override
    public String name() {
        return delegate.name();
    }

    @Override
    public String location() {
        return delegate.location();
    }

    @Override
    public StoreCapabilities capabilities() {
        return delegate.capabilities();
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return delegate.leadingHits(keys, deadline);
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return delegate.get(targets, deadline);
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return delegate.put(sources, deadline);
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return delegate.delete(keys, deadline);
    }

    @Override
    public CompletableFuture<Void> clear(Namespace namespace, Deadline deadline) {
        return delegate.clear(namespace, deadline);
    }

    @Override
    public CompletableFuture<Void> clearAll(Deadline deadline) {
        return delegate.clearAll(deadline);
    }

    @Override
    public StoreStats stats() {
        return delegate.stats();
    }

    @Override
    public void close() {
        delegate.close();
    }

    @Override
    public String toString() {
        return delegate.toString();
    }

    @Override
    public void onDropped(DroppedPages listener) {
        delegate.onDropped(listener);
    }
}
