package io.hicache.core.cache;

import io.hicache.core.store.PageStore;
import java.util.Optional;

/**
 * The page store (L3) a cache uses now, which an operator may detach, and another attach, while requests run. The
 * upload and prefetch loops {@link #acquire} the store for each piece of work and {@link #release} it after, so that a
 * detach can wait until nothing uses the store it hands back.
 *
 * <p>Thread-safe (this object's monitor). It holds the store as given (what {@link #detach} hands back) and as the
 * cache calls it (wrapped in timing); whoever holds the slot's store owns it: the cache while attached, the caller
 * after a detach.
 */
final class StoreSlot {
    private PageStore given;
    private PageStore used;
    private boolean uploadsAccepted;
    private int users;

    StoreSlot(PageStore given, PageStore used) {
        if (given != null) {
            attach(given, used);
        }
    }

    /** Whether a store is attached. */
    synchronized boolean attached() {
        return used != null;
    }

    /** The store as given, if one is attached: for names and for closing. */
    synchronized Optional<PageStore> given() {
        return Optional.ofNullable(given);
    }

    /** Whether new uploads may be queued: a store is attached and no detach has begun. */
    synchronized boolean uploadsAccepted() {
        return uploadsAccepted;
    }

    /** The store to call, counted as in use until {@link #release}; null (nothing to release) when none is attached. */
    synchronized PageStore acquire() {
        if (used == null) {
            return null;
        }
        users++;
        return used;
    }

    /** Ends one {@link #acquire} that returned a store. */
    synchronized void release() {
        users--;
        if (users == 0) {
            notifyAll();
        }
    }

    /** Attaches {@code store} (called as {@code wrapped}). */
    synchronized void attach(PageStore store, PageStore wrapped) {
        if (used != null) {
            throw new IllegalStateException("a page store is attached already ('" + given.name() + "'): detach it first");
        }
        given = store;
        used = wrapped;
        uploadsAccepted = true;
    }

    /** The first step of a detach: uploads queued from now on are skipped; those queued before still go out. */
    synchronized void stopUploads() {
        uploadsAccepted = false;
    }

    /**
     * Detaches the store: from now on {@link #acquire} finds none. Returns it as given (null if none was attached);
     * pieces of work that acquired it before may still be using it: see {@link #awaitUnused}.
     */
    synchronized PageStore detach() {
        PageStore was = given;
        given = null;
        used = null;
        uploadsAccepted = false;
        return was;
    }

    /** Waits until every {@link #acquire} has been released, or until {@code endNanos}; true if none is left. */
    synchronized boolean awaitUnused(long endNanos) throws InterruptedException {
        while (users > 0) {
            long left = endNanos - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            wait(Math.max(1, left / 1_000_000));
        }
        return true;
    }
}
