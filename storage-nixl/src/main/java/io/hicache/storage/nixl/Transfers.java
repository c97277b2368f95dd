package io.hicache.storage.nixl;

import io.hicache.core.Deadline;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * One batch's transfers, one per page: started one by one, waited for together within the call's deadline (those
 * still running then are cancelled and given a bounded time to stop touching memory), then released with their
 * storage registrations. A page whose transfer cannot even be made gets its failure status at once. Used by one
 * call; {@link #close()} once the outcomes are read.
 */
final class Transfers implements AutoCloseable {
    /** A storage registration a transfer uses, and how to let go of it. */
    interface Storage extends AutoCloseable {
        Registration registration();

        @Override
        void close();
    }

    /** Makes a page's storage registration. */
    @FunctionalInterface
    interface Acquire<S extends Storage> {
        S get() throws IOException;
    }

    private final NixlAgent agent;
    private final XferRequest[] requests;
    private final Storage[] storage;
    private final String[] details;
    private final CompletableFuture<NixlStatus>[] done;

    @SuppressWarnings({"unchecked", "rawtypes"})
    Transfers(NixlAgent agent, int pages) {
        this.agent = agent;
        this.requests = new XferRequest[pages];
        this.storage = new Storage[pages];
        this.details = new String[pages];
        this.done = new CompletableFuture[pages];
        for (int i = 0; i < pages; i++) {
            done[i] = CompletableFuture.completedFuture(NixlStatus.NOT_POSTED);
        }
    }

    /** A registration of its own for {@code region}, deregistered on close. */
    static Storage registered(NixlAgent agent, MemoryRegion region) {
        Registration r = agent.register(region);
        return new Storage() {
            @Override
            public Registration registration() {
                return r;
            }

            @Override
            public void close() {
                agent.deregister(r);
            }
        };
    }

    /** Starts page {@code i}'s transfer: its storage registration, its request, its post. */
    <S extends Storage> void start(int i, Acquire<S> acquire, Function<S, XferRequest> make) {
        try {
            S s = acquire.get();
            storage[i] = s;
            requests[i] = make.apply(s);
            agent.post(requests[i]);
            done[i] = agent.completion(requests[i]);
        } catch (NixlException e) {
            done[i] = CompletableFuture.completedFuture(e.status());
            details[i] = e.getMessage();
        } catch (IOException | RuntimeException e) {
            done[i] = CompletableFuture.completedFuture(NixlStatus.ERR_BACKEND);
            details[i] = e.toString();
        }
    }

    /**
     * Each page's final status, once all have ended or the deadline has passed and the rest were cancelled and given
     * {@code drainNanos} to stop; one that did not is {@link NixlStatus#IN_PROG}.
     */
    CompletableFuture<NixlStatus[]> awaitAll(Deadline deadline, long drainNanos) {
        CompletableFuture<Void> all = CompletableFuture.allOf(done);
        return all.copy()
                .completeOnTimeout(null, Math.max(0, deadline.remainingNanos()), TimeUnit.NANOSECONDS)
                .thenCompose(v -> {
                    if (all.isDone()) {
                        return all;
                    }
                    for (int i = 0; i < requests.length; i++) {
                        if (requests[i] != null && !done[i].isDone()) {
                            agent.cancel(requests[i]);
                        }
                    }
                    return all.copy().completeOnTimeout(null, drainNanos, TimeUnit.NANOSECONDS);
                })
                .thenApply(v -> {
                    NixlStatus[] statuses = new NixlStatus[done.length];
                    for (int i = 0; i < done.length; i++) {
                        statuses[i] = done[i].isDone() ? done[i].join() : NixlStatus.IN_PROG;
                    }
                    return statuses;
                });
    }

    /** Why page {@code i}'s transfer failed, or null. */
    @Nullable
    String detail(int i) {
        if (details[i] != null) {
            return details[i];
        }
        return requests[i] == null ? null : requests[i].errorDetail();
    }

    /** Releases the requests (cancelling any still running) and the storage registrations. */
    @Override
    public void close() {
        for (int i = 0; i < requests.length; i++) {
            if (requests[i] != null) {
                agent.release(requests[i]);
            }
            if (storage[i] != null) {
                storage[i].close();
            }
        }
    }
}
