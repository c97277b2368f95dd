package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * An in-memory page store whose hit queries, gets or puts can hang: from {@link #hang} on, such a call either answers
 * only at its deadline, with nothing done (a store whose backend stopped answering: a remote daemon stopped, an
 * endpoint that swallows packets) or, {@code never}, not at all (a store that breaks its contract). {@link #close}
 * answers every call still hanging, so the memory lent to them comes back. Thread-safe.
 */
final class HungPageStore extends ForwardingPageStore {
    private final InMemoryPageStore inner;

    HungPageStore() {
        this(new InMemoryPageStore(1L << 30));
    }

    private HungPageStore(InMemoryPageStore inner) {
        super(inner);
        this.inner = inner;
    }

    private volatile boolean queries;
    private volatile boolean gets;
    private volatile boolean puts;
    private volatile boolean never;
    private final ConcurrentLinkedQueue<CompletableFuture<?>> hanging = new ConcurrentLinkedQueue<>();

    /** From now on the calls named hang: until their deadline, or ({@code never}) for ever. */
    HungPageStore hang(boolean queries, boolean gets, boolean puts, boolean never) {
        this.never = never;
        this.queries = queries;
        this.gets = gets;
        this.puts = puts;
        return this;
    }

    /** Calls that hang for ever and have not been answered. */
    int hangingNow() {
        return (int) hanging.stream().filter(f -> !f.isDone()).count();
    }

    /** The store the pages are in, for filling it. */
    InMemoryPageStore inner() {
        return inner;
    }

    private <T> CompletableFuture<T> maybeHang(
            boolean hang, Deadline deadline, Supplier<T> nothingDone, Supplier<CompletableFuture<T>> call) {
        if (!hang) {
            return call.get();
        }
        CompletableFuture<T> f = new CompletableFuture<>();
        if (never) {
            hanging.add(f);
        } else {
            CompletableFuture.delayedExecutor(deadline.remainingNanos(), TimeUnit.NANOSECONDS)
                    .execute(() -> f.complete(nothingDone.get()));
        }
        return f;
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        return maybeHang(queries, deadline, () -> 0, () -> inner.leadingHits(keys, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return maybeHang(
                gets,
                deadline,
                () -> BatchResult.all(targets.size(), PageStatus.TIMED_OUT, "hung"),
                () -> inner.get(targets, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return maybeHang(
                puts,
                deadline,
                () -> BatchResult.all(sources.size(), PageStatus.TIMED_OUT, "hung"),
                () -> inner.put(sources, deadline));
    }

    @Override
    public String name() {
        return "hung";
    }

    @Override
    public String location() {
        return "memory, hanging on demand";
    }

    /** Answers what still hangs (as failed: nothing done), then closes the memory store. */
    @Override
    public void close() {
        for (CompletableFuture<?> f; (f = hanging.poll()) != null; ) {
            f.completeExceptionally(new HiCacheException(ErrorCode.STORE_CLOSED, "closed while hanging"));
        }
        inner.close();
    }
}
