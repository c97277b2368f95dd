package io.hicache.core.store;

import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * The page store a cache or the daemon uses now, which an operator may detach, and another attach, while requests
 * run. Work that calls the store {@link #acquire}s it and {@link #release}s it after, so that a detach can wait until
 * nothing uses the store it took away (or have it closed by its last user): a piece of work that began with a store
 * finishes with it, and none fails because the store went away meanwhile.
 *
 * <p>Thread-safe: its monitor guards the store and its users; {@link #attached} and {@link #writesAccepted} are
 * volatile reads for fast paths. Owns the attached store; a detached one belongs to whoever {@link #detach} says.
 */
public final class StoreSlot {
    private @Nullable PageStore store;
    /** Mirrors {@code store != null}, read without the monitor. */
    private volatile boolean attached;
    /** Whether pages cached now are written to the store: false from the start of a detach. */
    private volatile boolean writesAccepted;
    /** Acquisitions not yet released, per store (a detached store may still have some while another is attached). */
    private final Map<PageStore, Integer> users = new IdentityHashMap<>();
    /** Detached stores still in use that their last release closes. */
    private final Map<PageStore, Boolean> retired = new IdentityHashMap<>();

    /** A slot holding {@code store}, or none when null. */
    public StoreSlot(@Nullable PageStore store) {
        if (store != null) {
            attach(store);
        }
    }

    /** Whether a store is attached. */
    public boolean attached() {
        return attached;
    }

    /** Whether pages cached now are to be written to the store (one is attached and no detach has begun). */
    public boolean writesAccepted() {
        return writesAccepted;
    }

    /** The attached store, for names and tests; calls on it go through {@link #acquire}. */
    public synchronized Optional<PageStore> current() {
        return Optional.ofNullable(store);
    }

    /** The attached store, counted as in use until {@link #release}; null (nothing to release) when none is. */
    public synchronized @Nullable PageStore acquire() {
        if (store != null) {
            users.merge(store, 1, Integer::sum);
        }
        return store;
    }

    /** Ends an {@link #acquire} that returned {@code s}; the last user of a store detached to be closed closes it. */
    public void release(PageStore s) {
        boolean close;
        synchronized (this) {
            int left = users.merge(s, -1, Integer::sum);
            if (left == 0) {
                users.remove(s);
                notifyAll();
            }
            close = left == 0 && retired.remove(s) != null;
        }
        if (close) {
            s.close();
        }
    }

    /**
     * Attaches {@code s}, which the slot owns from here.
     *
     * @throws IllegalStateException if a store is attached already (the caller still owns {@code s})
     */
    public synchronized void attach(PageStore s) {
        if (store != null) {
            throw new IllegalStateException("a page store is attached already ('" + store.name() + "' at "
                    + store.location() + "): detach it first");
        }
        store = s;
        attached = true;
        writesAccepted = true;
    }

    /** The first step of a detach: pages cached from now on are not written to the store. */
    public void stopWrites() {
        writesAccepted = false;
    }

    /**
     * Detaches the store: from now on {@link #acquire} finds none. With {@code closeWhenUnused}, the slot closes it,
     * at once if nothing uses it, else at the last {@link #release}; without, it becomes the caller's (who may
     * {@link #awaitUnused} it before closing it). Returns it (null if none was attached).
     */
    public @Nullable PageStore detach(boolean closeWhenUnused) {
        PageStore was;
        boolean closeNow;
        synchronized (this) {
            was = store;
            store = null;
            attached = false;
            writesAccepted = false;
            closeNow = closeWhenUnused && was != null && !users.containsKey(was);
            if (closeWhenUnused && was != null && !closeNow) {
                retired.put(was, true);
            }
        }
        if (closeNow && was != null) {
            was.close();
        }
        return was;
    }

    /** Waits until nothing uses {@code s}, or until {@code endNanos}; true if nothing does. */
    public synchronized boolean awaitUnused(PageStore s, long endNanos) throws InterruptedException {
        while (users.containsKey(s)) {
            long left = endNanos - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            wait(Math.max(1, left / 1_000_000));
        }
        return true;
    }

    /** Closes the attached store and the detached ones still in use that it was to close. */
    public void close() {
        detach(true);
        Map<PageStore, Boolean> left;
        synchronized (this) {
            left = new IdentityHashMap<>(retired);
            retired.clear();
        }
        left.keySet().forEach(PageStore::close);
    }
}
