package io.hicache.core.cache;

import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import io.hicache.core.util.Checks;
import java.util.BitSet;
import java.util.Collection;

/**
 * The checks a test runs between operations: the tree's own invariants, and that every device page and host slot
 * in use has exactly one owner (a tree node, a request, a leftover of an earlier run) with none leaked. Run with
 * the cache's lock held and no prefetch in flight. Stateless.
 */
final class CacheConsistency {
    private CacheConsistency() {}

    /**
     * {@code full}: also re-hash every node's first page and account for every host slot (needs the loops idle);
     * otherwise the tree's structure, pins and the device pages' owners (valid at any time under the lock).
     */
    static void check(CacheCore cache, Collection<CacheRequest> requests, BitSet leftovers, boolean full) {
        RadixTree.Slots slots = cache.tree.checkInvariants(full);
        BitSet device = new BitSet();
        for (int p : slots.device()) {
            Checks.requireState(!device.get(p), "device page %d belongs to two nodes", p);
            device.set(p);
        }
        for (CacheRequest r : requests) {
            for (int p : r.ownedPages()) {
                Checks.requireState(!device.get(p), "device page %d belongs to a node and to %s", p, r);
                device.set(p);
            }
        }
        for (int p = 0; p < cache.device.pages(); p++) {
            boolean allocated = cache.pageAllocator.isAllocated(p);
            Checks.requireState(
                    allocated == device.get(p),
                    allocated
                            ? "device page %d is allocated but has no owner"
                            : "device page %d has an owner but is free",
                    p);
        }
        if (!full) {
            return;
        }
        BitSet host = new BitSet();
        for (int s : slots.host()) {
            Checks.requireState(!host.get(s), "host slot %d belongs to two nodes", s);
            host.set(s);
        }
        Checks.requireState(!host.intersects(leftovers), "a leftover host slot is also a node's");
        if (cache.host == null) {
            Checks.requireState(
                    host.isEmpty(), "a device-only cache has %d host slots in its tree", host.cardinality());
            return;
        }
        long used = cache.host().capacity() - cache.host().freeSlots();
        long releasing = cache.agreement.heldHostSlots();
        long owned = host.cardinality() + leftovers.cardinality() + cache.prefetcher.heldPages() + releasing;
        Checks.requireState(
                used == owned,
                "%d host slots in use, %d owned (%d by nodes, %d leftovers, %d by prefetches, "
                        + "%d by releases the ranks have yet to agree on)",
                used,
                owned,
                host.cardinality(),
                leftovers.cardinality(),
                cache.prefetcher.heldPages(),
                releasing);
    }

    /** Nodes with a copy in flight. */
    static long pendingCopies(RadixTree tree) {
        return count(tree.root());
    }

    private static long count(TreeNode n) {
        long c = n.pending() != null ? 1 : 0;
        for (TreeNode child : n.children()) {
            c += count(child);
        }
        return c;
    }
}
