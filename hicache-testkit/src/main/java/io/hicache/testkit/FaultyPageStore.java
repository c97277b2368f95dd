package io.hicache.testkit;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * A page store decorator that injects faults, for testing what sits above a store: each call may fail as a whole
 * (an exception in its future), and each page of a call may come back {@link PageStatus#FAILED} or
 * {@link PageStatus#TIMED_OUT} (a get then writes nothing into that target); lookups may under-count. Faults are
 * drawn from a seeded random source, so a failing run can be replayed. A fault never makes a page read back with
 * wrong bytes: it only takes pages away.
 *
 * <p>Thread-safe. Closing it closes the store it wraps (except a {@link #sharing} view).
 */
public final class FaultyPageStore extends ForwardingPageStore {
    private final double callFailure;
    private final double pageFailure;
    private final SplittableRandom random;
    private final AtomicLong injected = new AtomicLong();
    private final boolean ownsInner;

    /**
     * @param callFailure probability that a call fails as a whole
     * @param pageFailure probability that a page of a call fails (or a lookup stops early)
     */
    public FaultyPageStore(PageStore inner, double callFailure, double pageFailure, long seed) {
        this(inner, callFailure, pageFailure, seed, true);
    }

    private FaultyPageStore(PageStore inner, double callFailure, double pageFailure, long seed, boolean ownsInner) {
        super(inner);
        this.ownsInner = ownsInner;
        this.callFailure = callFailure;
        this.pageFailure = pageFailure;
        this.random = new SplittableRandom(seed);
    }

    /**
     * A view of {@code inner} that injects no faults and does not close it: for sharing one store between several
     * owners in a test, each of which closes its view.
     */
    public static FaultyPageStore sharing(PageStore inner) {
        return new FaultyPageStore(inner, 0, 0, 1, false);
    }

    /** Faults injected so far. */
    public long injected() {
        return injected.get();
    }

    private synchronized double draw() {
        return random.nextDouble();
    }

    private boolean failCall() {
        if (draw() < callFailure) {
            injected.incrementAndGet();
            return true;
        }
        return false;
    }

    private <T> CompletableFuture<T> failure() {
        return CompletableFuture.failedFuture(new HiCacheException(ErrorCode.STORE_IO, "injected fault"));
    }

    @Override
    public String location() {
        return delegate.location() + " (with injected faults)";
    }

    @Override
    public CompletableFuture<Integer> leadingHits(List<StoreKey> keys, Deadline deadline) {
        if (failCall()) {
            return failure();
        }
        return delegate.leadingHits(keys, deadline).thenApply(n -> {
            if (n > 0 && draw() < pageFailure) {
                injected.incrementAndGet();
                return (int) (draw() * n);
            }
            return n;
        });
    }

    @Override
    public CompletableFuture<BatchResult> get(PageBatch targets, Deadline deadline) {
        return failCall() ? failure() : withFailedPages(targets, asked -> delegate.get(asked, deadline));
    }

    @Override
    public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
        return failCall() ? failure() : withFailedPages(sources, asked -> delegate.put(asked, deadline));
    }

    /**
     * Draws which pages of {@code batch} fail and asks {@code call} for the others only, so that a failed page's
     * memory is never touched; the answer puts the failed pages back in their places.
     */
    private CompletableFuture<BatchResult> withFailedPages(
            PageBatch batch, Function<PageBatch, CompletableFuture<BatchResult>> call) {
        boolean[] fail = new boolean[batch.size()];
        PageBatch.Builder asked = PageBatch.builder(batch.size());
        int[] index = new int[batch.size()];
        int n = 0;
        for (int i = 0; i < batch.size(); i++) {
            fail[i] = draw() < pageFailure;
            if (fail[i]) {
                injected.incrementAndGet();
            } else {
                asked.add(batch.key(i), batch.page(i));
                index[n++] = i;
            }
        }
        int askedCount = n;
        return call.apply(asked.build()).thenApply(r -> merge(batch.size(), fail, r, index, askedCount));
    }

    private BatchResult merge(int size, boolean[] fail, BatchResult asked, int[] index, int askedCount) {
        BatchResult.Builder b = BatchResult.builder(size);
        for (int i = 0; i < size; i++) {
            if (fail[i]) {
                b.set(i, draw() < 0.5 ? PageStatus.FAILED : PageStatus.TIMED_OUT, "injected fault");
            }
        }
        for (int j = 0; j < askedCount; j++) {
            b.set(index[j], asked.status(j), asked.detail(j).orElse(null));
        }
        return b.build();
    }

    @Override
    public CompletableFuture<BatchResult> delete(List<StoreKey> keys, Deadline deadline) {
        return failCall() ? failure() : delegate.delete(keys, deadline);
    }

    @Override
    public void close() {
        if (ownsInner) {
            delegate.close();
        }
    }
}
