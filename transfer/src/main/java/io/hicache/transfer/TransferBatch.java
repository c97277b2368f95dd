package io.hicache.transfer;

import io.hicache.core.util.Checks;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import io.hicache.transfer.spi.TransportLink;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * A submitted batch of {@link TransferRequest}s and the state of each. Every request reaches a final state by the
 * batch's deadline (plus at most one slice timeout when a connection must be torn down to stop bytes in flight):
 * nothing waits unbounded. A request becomes final only once none of its bytes is still moving, so its local memory
 * may be reused as soon as {@link #state} says it is final.
 *
 * <p>Thread-safe.
 */
public final class TransferBatch {
    private final List<Request> requests;
    private final CountDownLatch pending;
    private final CompletableFuture<TransferBatch> completion = new CompletableFuture<>();

    TransferBatch(int size) {
        this.requests = new ArrayList<>(size);
        this.pending = new CountDownLatch(size);
        if (size == 0) {
            completion.complete(this);
        }
    }

    /** Number of requests. */
    public int size() {
        return requests.size();
    }

    /** The state of request {@code i}. */
    public RequestState state(int i) {
        return requests.get(i).state();
    }

    /** Why request {@code i} is not {@link RequestState#DONE}, or null when it is done or pending. */
    public @Nullable String reason(int i) {
        return requests.get(i).reason;
    }

    /** Whether every request is final. */
    public boolean isDone() {
        return pending.getCount() == 0;
    }

    /** How many requests are {@link RequestState#DONE}. */
    public int doneCount() {
        int n = 0;
        for (Request r : requests) {
            if (r.state.get() == RequestState.DONE) {
                n++;
            }
        }
        return n;
    }

    /** Whether every request is {@link RequestState#DONE}. */
    public boolean allDone() {
        return doneCount() == requests.size();
    }

    /** The first reason a request failed, or null. */
    public @Nullable String firstFailure() {
        for (Request r : requests) {
            if (r.reason != null) {
                return r.reason;
            }
        }
        return null;
    }

    /** Waits at most {@code timeout} for every request to be final; true if they are. */
    public boolean await(Duration timeout) throws InterruptedException {
        return pending.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * Completes when every request is final. A copy of the batch's own future each call: completing or cancelling it
     * changes nothing of the batch.
     */
    public CompletableFuture<TransferBatch> whenDone() {
        return completion.copy();
    }

    /** Runs {@code action} once every request is final (at once if they are), on the thread that finished the last. */
    void onFinal(Runnable action) {
        completion.whenComplete((b, e) -> action.run());
    }

    /**
     * Cancels the requests that are not final: slices not yet sent are dropped, slices on the wire finish (bounded
     * by the slice timeout), then the requests become {@link RequestState#CANCELLED}.
     */
    public void cancel() {
        for (Request r : requests) {
            r.intend(RequestState.CANCELLED, "cancelled");
        }
    }

    void add(Request r) {
        requests.add(r);
    }

    /** The deadline passed: what is not final times out; slices on the wire are abandoned. */
    void expire() {
        for (Request r : requests) {
            if (r.intend(RequestState.TIMED_OUT, "the deadline passed")) {
                for (SliceImpl s : r.slices) {
                    if (!s.finished) {
                        s.link.abandon(s);
                    }
                }
            }
        }
    }

    /** Last resort for a transport that never reported: finalizes what is left. */
    void forceFinal(String reason) {
        for (Request r : requests) {
            r.intend(RequestState.TIMED_OUT, reason);
            r.finish();
        }
    }

    private void requestFinal() {
        pending.countDown();
        if (pending.getCount() == 0) {
            completion.complete(this);
        }
    }

    /** One request's slices and state. */
    final class Request {
        final List<SliceImpl> slices = new ArrayList<>();
        final AtomicReference<RequestState> state = new AtomicReference<>(RequestState.PENDING);
        final AtomicReference<RequestState> intent = new AtomicReference<>();
        final AtomicInteger outstanding = new AtomicInteger();
        volatile @Nullable String reason;

        /** The state, never null: it starts PENDING and is only compared and set to a final one. */
        RequestState state() {
            return Checks.checkNotNull(state.get(), "a request's state");
        }

        /** Final immediately, without moving anything (refused at submit). */
        void refuse(String why) {
            intent.set(RequestState.FAILED);
            reason = why;
            finish();
        }

        boolean intend(RequestState what, String why) {
            if (state().isFinal() || !intent.compareAndSet(null, what)) {
                return false;
            }
            reason = why;
            return true;
        }

        void sliceDone(@Nullable String failure) {
            if (failure != null) {
                intend(RequestState.FAILED, failure);
            }
            if (outstanding.decrementAndGet() == 0) {
                finish();
            }
        }

        void finish() {
            RequestState i = intent.get();
            if (state.compareAndSet(RequestState.PENDING, i == null ? RequestState.DONE : i)) {
                if (i == null) {
                    reason = null;
                }
                requestFinal();
            }
        }
    }

    /** A slice of a request, as transports see it. */
    final class SliceImpl implements Slice {
        private final Request request;
        private final TransportLink link;
        private final TransferOp op;
        private final MemorySegment local;
        private final RegionDescriptor region;
        private final long remoteOffset;
        private final AtomicInteger retries;
        private final AtomicBoolean over = new AtomicBoolean();
        volatile boolean finished;

        SliceImpl(
                Request request,
                TransportLink link,
                TransferOp op,
                MemorySegment local,
                RegionDescriptor region,
                long remoteOffset,
                int retries) {
            this.request = request;
            this.link = link;
            this.op = op;
            this.local = local;
            this.region = region;
            this.remoteOffset = remoteOffset;
            this.retries = new AtomicInteger(retries);
        }

        /** The link that carries it. */
        TransportLink link() {
            return link;
        }

        @Override
        public TransferOp op() {
            return op;
        }

        @Override
        public MemorySegment local() {
            return local;
        }

        @Override
        public RegionDescriptor region() {
            return region;
        }

        @Override
        public long remoteOffset() {
            return remoteOffset;
        }

        @Override
        public boolean wanted() {
            return request.intent.get() == null;
        }

        @Override
        public int takeRetry() {
            return retries.decrementAndGet();
        }

        @Override
        public void done(@Nullable String failure) {
            if (!over.compareAndSet(false, true)) {
                return;
            }
            finished = true;
            request.sliceDone(failure);
        }
    }
}
