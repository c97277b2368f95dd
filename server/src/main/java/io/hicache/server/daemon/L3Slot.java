package io.hicache.server.daemon;

import io.hicache.core.store.PageStore;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The daemon's L3 page store, which an operator may detach, and another attach, while requests run (the STORE
 * request). Work that calls the store {@link #acquire}s it and {@link #release}s it after, so that a detached store
 * is closed only once nothing uses it: a request that began with a store finishes with it, and none fails because
 * the store went away meanwhile.
 *
 * <p>Thread-safe: its monitor guards the store and its users; {@link #attached} and {@link #writesAccepted} are
 * volatile reads for the event loop's fast paths. Owns the attached store, and a detached one until it is closed.
 */
final class L3Slot {
    private PageStore store;
    /** Mirrors {@code store != null}, read without the monitor. */
    private volatile boolean attached;
    /** Whether pages put now are written behind: false from the start of a detach. */
    private volatile boolean writesAccepted;
    /** Acquisitions not yet released, per store (a detached store may still have some while another is attached). */
    private final Map<PageStore, Integer> users = new IdentityHashMap<>();
    /** Detached stores still in use: each is closed by its last release. */
    private final Map<PageStore, Boolean> retired = new IdentityHashMap<>();

    L3Slot(PageStore store) {
        if (store != null) {
            attach(store);
        }
    }

    /** Whether a store is attached: a page not in the slab may be in L3. */
    boolean attached() {
        return attached;
    }

    /** Whether a page put now is written behind (a store is attached and no detach has begun). */
    boolean writesAccepted() {
        return writesAccepted;
    }

    /** The attached store, for names and tests; calls on it go through {@link #acquire}. */
    synchronized Optional<PageStore> current() {
        return Optional.ofNullable(store);
    }

    /** The attached store, counted as in use until {@link #release}; null (nothing to release) when none is. */
    synchronized PageStore acquire() {
        if (store != null) {
            users.merge(store, 1, Integer::sum);
        }
        return store;
    }

    /** Ends an {@link #acquire} that returned {@code s}; the last user of a detached store closes it. */
    void release(PageStore s) {
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
    synchronized void attach(PageStore s) {
        if (store != null) {
            throw new IllegalStateException("a store is attached already ('" + store.name() + "' at " + store.location()
                    + "): detach it first");
        }
        store = s;
        attached = true;
        writesAccepted = true;
    }

    /** The first step of a detach: pages put from now on stay in the slab only. */
    void stopWrites() {
        writesAccepted = false;
    }

    /**
     * Detaches the store: from now on {@link #acquire} finds none. It is closed here if nothing uses it, else by the
     * last {@link #release}. Returns it (null if none was attached).
     */
    PageStore detach() {
        PageStore was;
        boolean closeNow;
        synchronized (this) {
            was = store;
            store = null;
            attached = false;
            writesAccepted = false;
            closeNow = was != null && !users.containsKey(was);
            if (was != null && !closeNow) {
                retired.put(was, true);
            }
        }
        if (closeNow) {
            was.close();
        }
        return was;
    }

    /** Waits until nothing uses {@code s}, or until {@code endNanos}; true if nothing does. */
    synchronized boolean awaitUnused(PageStore s, long endNanos) throws InterruptedException {
        while (users.containsKey(s)) {
            long left = endNanos - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            wait(Math.max(1, left / 1_000_000));
        }
        return true;
    }

    /** Closes the attached store and the detached ones still in use: the daemon is stopping. */
    void close() {
        detach();
        Map<PageStore, Boolean> left;
        synchronized (this) {
            left = new IdentityHashMap<>(retired);
            retired.clear();
        }
        left.keySet().forEach(PageStore::close);
    }
}
