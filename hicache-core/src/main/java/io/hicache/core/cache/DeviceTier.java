package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHashes;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * The device tier's policy: how device pages are taken for a request or a load-back, and what is evicted to free
 * them. Eviction goes leaf-first in the tree's order (lowest effective retention priority, then LRU or LFU); a node
 * the host has is demoted (it stays cached there), one it has not is backed up first (write-back, or a node with
 * host-only pages below it) or, when the host has no room, gives way: it is removed with what hangs below it. Before
 * an allocation gives up it applies the copies that have finished and waits up to {@code hicache-allocate-wait} for
 * those in flight. With {@code hicache-device-free-target} set, part of the pool is kept free ahead of need: device
 * pages the host also holds are demoted by the loop {@code hicache-device-evictor} once an allocation or a finished
 * backup leaves less free (for ranks that agree, at each settle instead, where every rank does it at the same point),
 * so that a load-back finds its pages free and neither evicts nor waits for write-through backups.
 *
 * <p>Not thread-safe: every method but {@link #close} and {@link #ended} is called with the engine's lock held (the
 * evictor loop takes it). Owns the evictor loop.
 */
final class DeviceTier {
    private final CacheCore core;
    private final Loop<Boolean> evictor;

    DeviceTier(CacheCore core) {
        this.core = core;
        this.evictor = new Loop<>("device-evictor", 1, ignored -> keepFreeLocking(), core.metrics);
    }

    /** Device pages to keep free: the configured share of the pool, 0 when off. */
    private int freeTarget() {
        return (int) Math.ceil(core.pageAllocator.capacity() * core.config.deviceFreeTarget());
    }

    /** For one rank: asks the evictor loop to free pages ahead of need when fewer than the target are free. */
    void maybeKeepFree() {
        if (!core.agreement.enabled() && core.pageAllocator.available() < freeTarget() && evictor.depth() == 0) {
            evictor.offer(Boolean.TRUE);
        }
    }

    /** For ranks that agree, at a settle: frees pages ahead of need here, where every rank does it at once. */
    void afterSettle() {
        if (core.agreement.enabled()) {
            keepFree();
        }
    }

    private void keepFreeLocking() {
        core.lock.lock();
        try {
            if (core.isOpen()) {
                keepFree();
            }
        } finally {
            core.lock.unlock();
        }
    }

    /** Demotes device pages the host holds until the target is free, or none is left to demote. */
    private void keepFree() {
        int missing = freeTarget() - core.pageAllocator.available();
        if (missing > 0) {
            core.tickClock(); // retention decays by the time of this eviction
            RadixTree.DeviceEviction e = core.tree.demoteDevice(missing);
            applyEviction(e);
        }
    }

    boolean ended() {
        return evictor.ended();
    }

    void close(long waitMillis) {
        evictor.close(waitMillis);
    }

    /**
     * {@code count} device pages, evicting when the pool is short.
     *
     * @param heldByCaller device pages the caller itself holds (its pinned prefix, its pages not committed): they
     *     cannot come free while it waits
     * @throws HiCacheException {@link ErrorCode#PAGES_EXHAUSTED} when pages pinned by open requests (or copies that
     *     did not finish in time) leave too little to evict, and at once when {@code count} could never fit; the
     *     message says which, and how the pool stands
     */
    int[] allocate(int count, int heldByCaller) {
        var allocator = core.pageAllocator;
        if (count > allocator.capacity() - heldByCaller) {
            core.metrics.fail("allocate: PAGES_EXHAUSTED");
            throw new HiCacheException(
                    ErrorCode.PAGES_EXHAUSTED,
                    "no " + count + " device pages, and this can never "
                            + "fit: the device pool has " + allocator.capacity() + " pages in all"
                            + (heldByCaller > 0 ? ", " + heldByCaller + " of them held by this request itself" : "")
                            + ". Do not retry: split the work into smaller chunks, or give the device pool more pages");
        }
        int[] pages = allocator.tryAllocate(count);
        Deadline wait = null;
        while (pages == null) {
            boolean over = wait != null && wait.isOver();
            if (core.agreement.enabled()) {
                over = core.settle(over ? 0 : 1)[0] == 0; // one rank's wait is over: every rank's is
            } else {
                core.completions.runQueuedHere();
            }
            evict(count - allocator.available());
            pages = allocator.tryAllocate(count);
            if (pages != null) {
                break;
            }
            if (wait == null) {
                wait = Deadline.after(core.config.allocateWait());
            }
            if (over || !copiesInFlight()) {
                core.metrics.fail("allocate: PAGES_EXHAUSTED");
                throw new HiCacheException(
                        ErrorCode.PAGES_EXHAUSTED,
                        "no " + count + " device pages: "
                                + allocator.available() + " free, " + core.tree.evictableDevicePages()
                                + " evictable of "
                                + core.tree.devicePages() + " cached; the rest are pinned by open requests"
                                + (copiesInFlight()
                                        ? " or by copies still running after "
                                                + core.config.allocateWait().toMillis() + " ms (hicache-allocate-wait)"
                                        : "")
                                + (core.host == null
                                        ? "; device only"
                                        : "; host: " + core.host().freeSlots() + " of "
                                                + core.host().capacity() + " slots free")
                                + ". Temporary: retry once requests commit or close, or give the device pool more pages");
            }
            LockSupport.parkNanos(200_000); // a copy finishing frees or unlocks pages
        }
        maybeKeepFree();
        return pages;
    }

    /** Copies started and not applied yet: what could still unlock device pages while the caller holds the lock. */
    private boolean copiesInFlight() {
        return core.outstanding.get() > 0 || core.completions.depth() > 0;
    }

    void free(int[] pages) {
        if (pages.length > 0) {
            core.pageAllocator.free(pages);
        }
    }

    /**
     * Frees device pages until {@code pages} more are free, or nothing else can go. A node that must be backed up
     * before it goes is backed up and demoted; one whose backup cannot start (no host room) gives way rather than
     * staying least recently used and pinning the pool.
     */
    private void evict(int pages) {
        core.tickClock(); // retention decays by the time of this eviction
        var allocator = core.pageAllocator;
        int wanted = allocator.available() + pages;
        Set<TreeNode> tried = Collections.newSetFromMap(new IdentityHashMap<>());
        while (allocator.available() < wanted) {
            RadixTree.DeviceEviction e = core.tree.evictDevice(
                    wanted - allocator.available(),
                    core.host != null && core.config.writePolicy() == WritePolicy.WRITE_BACK,
                    tried);
            applyEviction(e);
            if (e.needBackup().isEmpty()) {
                return; // nothing else can go now
            }
            for (TreeNode n : e.needBackup()) {
                tried.add(n);
                Backups.BackupOp op = core.backups.start(n);
                if (op == null) {
                    giveWay(n);
                } else if (op.awaitAndFinish(Deadline.after(core.config.storageTimeout()))) {
                    free(core.tree.demote(n));
                    core.metrics.deviceEvictedPages.add(n.pages());
                    core.events.removed(n.hashes(), Medium.GPU);
                }
            }
        }
    }

    /** Frees the device pages {@code e} took from the tree, counting and announcing them. */
    void applyEviction(RadixTree.DeviceEviction e) {
        free(e.freedPages());
        for (PageHashes h : e.demoted()) {
            core.metrics.deviceEvictedPages.add(h.size());
            core.events.removed(h, Medium.GPU);
        }
        for (PageHashes h : e.deleted()) {
            core.metrics.deviceDeletedPages.add(h.size());
            core.events.removed(h, Medium.GPU);
        }
    }

    /** Removes a node that cannot be backed up, and the host-only runs below it; nothing if one is in use. */
    private void giveWay(TreeNode n) {
        RadixTree.Dropped d = core.tree.dropWithSubtree(n);
        if (d == null) {
            return;
        }
        free(d.devicePages());
        if (d.hostSlots().length > 0) {
            core.host().release(d.hostSlots());
        }
        core.metrics.deviceDeletedPages.add(d.devicePages().length);
        core.metrics.hostEvictedPages.add(d.hostSlots().length);
        core.metrics.fail("backup: no host room; the node gave way (dropped)");
        core.events.removed(d.deviceRun(), Medium.GPU);
        for (PageHashes h : d.hostRuns()) {
            core.events.removed(h, Medium.CPU);
        }
    }
}
