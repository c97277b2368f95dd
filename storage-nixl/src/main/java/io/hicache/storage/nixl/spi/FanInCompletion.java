package io.hicache.storage.nixl.spi;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * One post's {@link NixlBackend.Completion} for a backend that runs the post as parallel parts (a file each, an object
 * each): each part reports how it ended, and the last one to end completes the post, once, with
 *
 * <ul>
 *   <li>the first error a part {@link #fail reported}, an {@link NixlStatus#ERR_CANCELED} giving way to any later
 *       error (a part that stopped because another failed is not why the post failed);</li>
 *   <li>else {@link NixlStatus#ERR_CANCELED} if a part {@link #stopped() stopped early} for a {@link #cancel()};</li>
 *   <li>else {@link NixlStatus#SUCCESS}.</li>
 * </ul>
 *
 * A failure cancels the parts still running: the transfer has failed, the other descriptors need not be touched.
 * Thread-safe: parts end on any thread, and a cancel may come from any thread while they run.
 */
public final class FanInCompletion {
    private final NixlBackend.Completion done;
    private final AtomicInteger remaining;
    private final List<Runnable> onCancel = new ArrayList<>();
    private volatile boolean cancelled;
    private boolean stopped;
    /** The first failure, or null. */
    private @Nullable NixlStatus error;

    private @Nullable String detail;

    /** A post of {@code parts} parts that completes {@code done}; with no parts it completes it now, successfully. */
    public FanInCompletion(NixlBackend.Completion done, int parts) {
        this.done = done;
        this.remaining = new AtomicInteger(parts);
        if (parts == 0) {
            done.complete(NixlStatus.SUCCESS, null);
        }
    }

    /**
     * Runs {@code stop} on {@link #cancel()}, or at once if the post is cancelled already: for a part that must be
     * told to stop writing (a GET to abandon) rather than looking at {@link #isCancelled()} itself.
     */
    public void onCancel(Runnable stop) {
        synchronized (this) {
            if (!cancelled) {
                onCancel.add(stop);
                return;
            }
        }
        stop.run();
    }

    /** Asks the parts to stop: {@link #isCancelled()} turns true and the {@link #onCancel} actions run. Idempotent. */
    public void cancel() {
        List<Runnable> toRun;
        synchronized (this) {
            if (cancelled) {
                return;
            }
            cancelled = true;
            toRun = List.copyOf(onCancel);
            onCancel.clear();
        }
        toRun.forEach(Runnable::run);
    }

    /** Whether the post was cancelled or has failed: a part checks it before each descriptor. */
    public boolean isCancelled() {
        return cancelled;
    }

    /** Reports that a part stopped before its end because of a {@link #cancel()}. */
    public synchronized void stopped() {
        stopped = true;
    }

    /** Reports that a part failed with {@code status} because of {@code why}, and cancels the others. */
    public void fail(NixlStatus status, @Nullable String why) {
        synchronized (this) {
            if (error == null || (error == NixlStatus.ERR_CANCELED && status != NixlStatus.ERR_CANCELED)) {
                error = status;
                detail = why;
            }
        }
        cancel();
    }

    /** Reports that a part has ended (after {@link #fail} or {@link #stopped()}, if either); the last completes. */
    public void partEnded() {
        if (remaining.decrementAndGet() != 0) {
            return;
        }
        NixlStatus status;
        String why;
        synchronized (this) {
            status = error != null ? error : stopped ? NixlStatus.ERR_CANCELED : NixlStatus.SUCCESS;
            why = error != null ? (detail != null ? detail : error.name()) : stopped ? "cancelled" : null;
        }
        done.complete(status, why);
    }
}
