package io.hicache.core.cache;

import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHashes;
import io.hicache.core.tree.RadixTree;
import org.jspecify.annotations.Nullable;

/**
 * The host tier's policy: how host slots are reserved (for a backup or a prefetch) and what is evicted to free them.
 * Leftovers of an earlier run go first, then host-only leaves of the tree (lowest effective retention priority, then
 * the policy's order). Past {@code hicache-host-high-water}, the loop {@code hicache-host-evictor} evicts down to
 * {@code hicache-host-low-water}; ranks that agree do it at their settles instead, where every rank does it at the
 * same point.
 *
 * <p>Every method but {@link #close} and {@link #ended} is called with the engine's lock held (the evictor loop takes
 * it). Owns the evictor loop.
 */
final class HostTier {
    private final CacheCore core;
    private final Loop<Boolean> evictor;

    HostTier(CacheCore core) {
        this.core = core;
        this.evictor = new Loop<>("host-evictor", 1, ignored -> evictToLowWaterLocking(), core.metrics);
    }

    /** {@code count} reserved host slots, evicting host pages when short; null (nothing reserved) if it cannot. */
    int @Nullable [] reserve(int count) {
        if (core.host == null) {
            return null;
        }
        if (core.agreement.enabled()) {
            return reserveAgreeing(count);
        }
        int[] slots = core.host().tryReserve(count);
        if (slots == null) {
            evict(count - core.host().freeSlots());
            slots = core.host().tryReserve(count);
        }
        if (slots != null && occupancy() >= core.config.hostHighWater() && evictor.depth() == 0) {
            evictor.offer(Boolean.TRUE);
        }
        return slots;
    }

    /**
     * {@link #reserve} for ranks that agree. Each rank's leftovers of an earlier run are its own, so the room that
     * decides whether to evict counts them as free (the same on every rank); they are freed only when this rank needs
     * their slots.
     */
    private int @Nullable [] reserveAgreeing(int count) {
        if (room() < count) {
            evictTree(count - room());
            if (room() < count) {
                return null;
            }
        }
        if (core.host().freeSlots() < count) {
            core.leftovers.release(count - core.host().freeSlots());
        }
        return core.host().tryReserve(count);
    }

    /** Free host slots, counting leftovers as free for ranks that agree (see {@link #reserveAgreeing}). */
    private int room() {
        return core.host().freeSlots() + (core.agreement.enabled() ? core.leftovers.count() : 0);
    }

    private double occupancy() {
        return 1.0 - (double) room() / core.host().capacity();
    }

    /** Frees {@code pages} host slots: leftovers of an earlier run first, then host-only leaves of the tree. */
    void evict(int pages) {
        int freed = core.leftovers.release(pages);
        if (freed < pages) {
            evictTree(pages - freed);
        }
    }

    /** Frees up to {@code pages} host slots of host-only leaves of the tree. */
    private void evictTree(int pages) {
        core.tickClock(); // retention decays by the time of this eviction
        RadixTree.HostEviction e = core.tree.evictHostReporting(pages);
        core.host().release(e.freedSlots());
        core.metrics.hostEvictedPages.add(e.freedSlots().length);
        for (PageHashes h : e.removed()) {
            core.events.removed(h, Medium.CPU);
        }
    }

    /** For ranks that agree, at a settle: evicts down to the low-water mark when past the high-water mark. */
    void afterSettle() {
        if (core.agreement.enabled() && core.host != null && occupancy() >= core.config.hostHighWater()) {
            evictToLowWater();
        }
    }

    /** What the evictor loop does when the pool passes its high-water mark: evict down to the low-water mark. */
    private void evictToLowWaterLocking() {
        core.lock.lock();
        try {
            if (core.isOpen() && core.host != null) {
                evictToLowWater();
            }
        } finally {
            core.lock.unlock();
        }
    }

    private void evictToLowWater() {
        int target = (int) Math.ceil(core.host().capacity() * (1 - core.config.hostLowWater()));
        if (room() < target) {
            if (core.agreement.enabled()) {
                evictTree(target - room());
            } else {
                evict(target - room());
            }
        }
    }

    boolean ended() {
        return evictor.ended();
    }

    void close(long waitMillis) {
        evictor.close(waitMillis);
    }
}
