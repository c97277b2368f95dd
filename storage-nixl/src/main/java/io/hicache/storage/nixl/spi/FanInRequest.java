package io.hicache.storage.nixl.spi;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A prepared transfer that runs as parallel parts (a file each, an object each), each post fanned in by a
 * {@link FanInCompletion}: the part of a backend's request that is the same whatever the parts do. A subclass says how
 * one part starts; posting starts them all, cancelling cancels the current post's completion (which tells the parts).
 * Thread-safe as {@link NixlBackend.Request} requires.
 *
 * @param <T> what one part works on
 */
public abstract class FanInRequest<T> implements NixlBackend.Request {
    private final List<T> parts;
    /** The post in progress, or the last one; null before the first post and after release. */
    private volatile @Nullable FanInCompletion current;

    protected FanInRequest(List<T> parts) {
        this.parts = List.copyOf(parts);
    }

    /**
     * Starts one part without blocking for its I/O. The part reports to {@code post} how it ended and then calls
     * {@link FanInCompletion#partEnded()} exactly once, also when it could not start.
     */
    protected abstract void start(FanInCompletion post, T part);

    @Override
    public final void post(NixlBackend.Completion done) {
        FanInCompletion post = new FanInCompletion(done, parts.size());
        current = post;
        for (T part : parts) {
            start(post, part);
        }
    }

    @Override
    public final void cancel() {
        FanInCompletion post = current;
        if (post != null) {
            post.cancel();
        }
    }

    @Override
    public void release() {
        current = null;
    }
}
