package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.XferOp;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * A prepared transfer (NIXL's {@code nixlXferReqH}): posted with {@link NixlAgent#post}, polled with
 * {@link NixlAgent#status}, released with {@link NixlAgent#release}. One post at a time; it can be posted again once
 * the previous post is final. Thread-safe; its maker releases it (the agent releases what is left when it closes).
 */
final class XferRequest {
    private final XferOp op;
    private final NixlBackend backend;
    private final NixlBackend.Request prepared;
    private final @Nullable String notification;
    private final long bytes;
    private final int descriptors;

    private NixlStatus status = NixlStatus.NOT_POSTED;
    /** Why the last post failed; null while none has. */
    private @Nullable String detail;

    private boolean released;
    private boolean timedOut;
    private int post;
    private CompletableFuture<NixlStatus> done = CompletableFuture.completedFuture(NixlStatus.NOT_POSTED);

    XferRequest(
            XferOp op,
            NixlBackend backend,
            NixlBackend.Request prepared,
            @Nullable String notification,
            long bytes,
            int descriptors) {
        this.op = op;
        this.backend = backend;
        this.prepared = prepared;
        this.notification = notification;
        this.bytes = bytes;
        this.descriptors = descriptors;
    }

    public XferOp op() {
        return op;
    }

    /** The backend that runs it. */
    public String backendName() {
        return backend.name();
    }

    /** Bytes it moves per post. */
    public long bytes() {
        return bytes;
    }

    public int descriptorCount() {
        return descriptors;
    }

    /** Why the last post failed, or null. */
    public synchronized @Nullable String errorDetail() {
        return detail;
    }

    /* ------------------------------------------------------------- state, driven by the agent */

    synchronized CompletableFuture<NixlStatus> begin() {
        if (released) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "the request was released");
        }
        if (status == NixlStatus.IN_PROG) {
            throw new NixlException(NixlStatus.ERR_REPOST_ACTIVE, "the request's previous post is still in progress");
        }
        status = NixlStatus.IN_PROG;
        detail = null;
        timedOut = false;
        post++;
        done = new CompletableFuture<>();
        return done;
    }

    synchronized int post() {
        return post;
    }

    /**
     * Records a post's end; false if it is stale (an earlier post) or already ended. {@code onSuccess} runs before
     * waiters wake, so what it does (queue a notification) is visible to them.
     */
    boolean finish(int ofPost, NixlStatus finalStatus, @Nullable String why, @Nullable Runnable onSuccess) {
        CompletableFuture<NixlStatus> toComplete;
        NixlStatus reported;
        synchronized (this) {
            if (ofPost != post || status != NixlStatus.IN_PROG) {
                return false;
            }
            reported = finalStatus == NixlStatus.ERR_CANCELED && timedOut ? NixlStatus.ERR_TIMED_OUT : finalStatus;
            status = reported;
            detail = reported.isError() ? (why == null ? reported.name() : why) : null;
            toComplete = done;
        }
        if (reported == NixlStatus.SUCCESS && onSuccess != null) {
            onSuccess.run();
        }
        toComplete.complete(reported);
        return true;
    }

    synchronized NixlStatus status() {
        if (released) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "the request was released");
        }
        return status;
    }

    synchronized CompletableFuture<NixlStatus> completion() {
        if (released) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "the request was released");
        }
        return done;
    }

    /** Asks the backend to stop this post; {@code stall} marks it as stopped by its stall deadline. */
    void cancel(int ofPost, boolean stall) {
        synchronized (this) {
            if (ofPost != post || status != NixlStatus.IN_PROG) {
                return;
            }
            timedOut |= stall;
        }
        prepared.cancel();
    }

    /** Marks it released; returns whether a post was in progress (and has been cancelled). */
    boolean markReleased() {
        boolean active;
        CompletableFuture<NixlStatus> current;
        synchronized (this) {
            if (released) {
                throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "the request was already released");
            }
            released = true;
            active = status == NixlStatus.IN_PROG;
            current = done;
        }
        if (active) {
            prepared.cancel();
            // The backend's resources go once the cancelled post has ended.
            current.whenComplete((s, e) -> prepared.release());
        } else {
            prepared.release();
        }
        return active;
    }

    synchronized boolean isReleased() {
        return released;
    }

    NixlBackend.Request prepared() {
        return prepared;
    }

    @Nullable
    String notification() {
        return notification;
    }
}
