package io.hicache.core.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.PageHasher;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class RadixTreeTest {
    private static final int PAGE = 4;

    static int[] tokens(int... t) {
        return t;
    }

    /** {@code pages} pages of tokens, token i = base + i. */
    static int[] seq(int base, int pages) {
        int[] t = new int[pages * PAGE];
        for (int i = 0; i < t.length; i++) {
            t[i] = base + i;
        }
        return t;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    static int[] range(int from, int count) {
        int[] r = new int[count];
        for (int i = 0; i < count; i++) {
            r[i] = from + i;
        }
        return r;
    }

    @Test
    void insertThenMatchFindsTheWholePagesAndIgnoresATrailingPartialPage() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        int[] t = seq(100, 3);
        tree.insert(t, range(0, 3), 1);
        int[] query = concat(t, new int[] {1, 2}); // 2 tokens past the last whole page
        MatchResult m = tree.match(query);
        assertEquals(3, m.devicePages());
        assertEquals(0, m.hostPages());
        assertArrayEquals(range(0, 3), tree.devicePagesTo(m.lastDeviceNode()));
        assertEquals(0, tree.match(seq(999, 2)).matchedPages());
        tree.checkInvariants();
    }

    @Test
    void aMatchEndingInsideANodeSplitsItAndKeepsPagesHashesAndLocks() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        int[] t = seq(0, 4);
        TreeNode leaf = tree.insert(t, range(10, 4), 1).last();
        tree.lock(leaf);
        int[] other = concat(seq(0, 2), seq(500, 1));
        MatchResult m = tree.match(other);
        assertEquals(2, m.devicePages());
        TreeNode upper = m.lastNode();
        assertSame(upper, leaf.parent());
        assertArrayEquals(range(10, 2), upper.devicePages());
        assertArrayEquals(new int[] {12, 13}, leaf.devicePages());
        assertEquals(1, upper.lockRef(), "a split copies the lock");
        PageHasher h = new PageHasher(PAGE);
        assertEquals(h.hashPages(t).get(1), upper.lastHash());
        assertEquals(h.hashPages(t).get(3), leaf.lastHash());
        tree.unlock(leaf);
        assertEquals(0, upper.lockRef());
        tree.checkInvariants();
    }

    @Test
    void insertReportsDuplicatesAndGivesEvictedNodesTheRecomputedPages() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        int[] t = seq(0, 3);
        TreeNode n = tree.insert(t, range(0, 3), 1).last();
        // Another request computed the same prefix into other pages: they come back to be freed.
        RadixTree.InsertResult again = tree.insert(concat(t, seq(900, 1)), new int[] {7, 8, 9, 20}, 1);
        assertArrayEquals(new int[] {7, 8, 9}, again.duplicatePages());
        assertEquals(1, again.newPages());
        assertEquals(List.of(again.last()), again.storedOnDevice(), "only the new leaf took device pages");
        // Back the first node up and evict it: a later insert re-points it at fresh pages.
        int[] slots = {50, 51, 52};
        TreeNode.PendingCopy p = tree.beginBackup(n, slots);
        tree.finishBackup(p, n, true);
        tree.evictDevice(4, false); // the leaf first, then n once its child is gone
        assertFalse(n.onDevice());
        RadixTree.InsertResult recomputed = tree.insert(t, new int[] {30, 31, 32}, 1);
        assertEquals(0, recomputed.duplicatePages().length);
        assertArrayEquals(new int[] {30, 31, 32}, n.devicePages());
        assertEquals(List.of(n), recomputed.storedOnDevice(), "the evicted node took the recomputed pages");
        assertArrayEquals(t, n.tokenIds());
        assertTrue(n.backedUp(), "re-pointed at the device, it keeps its host copy");
        tree.checkInvariants();
    }

    @Test
    void deviceEvictionIsLeafFirstDemotesBackedUpNodesAndDeletesTheRest() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode a = tree.insert(seq(0, 2), range(0, 2), 1).last();
        TreeNode b = tree.insert(concat(seq(0, 2), seq(100, 2)), new int[] {0, 1, 2, 3}, 1)
                .last();
        TreeNode c = tree.insert(concat(seq(0, 2), seq(200, 2)), new int[] {0, 1, 4, 5}, 1)
                .last();
        tree.finishBackup(tree.beginBackup(b, new int[] {10, 11}), b, true);
        tree.lock(c);
        RadixTree.DeviceEviction e = tree.evictDevice(100, false);
        // c is locked (and so is a, its ancestor): only b can go, and it is backed up, so it stays as host-only.
        assertArrayEquals(new int[] {2, 3}, e.freedPages());
        assertFalse(b.onDevice());
        assertTrue(b.backedUp());
        assertTrue(a.onDevice() && c.onDevice());
        tree.unlock(c);
        e = tree.evictDevice(100, false);
        // c is not backed up: deleted. a then has only host-only children, but is not backed up itself: deleting it
        // would cut b off, so it is handed back to be backed up first.
        assertArrayEquals(new int[] {4, 5}, e.freedPages());
        assertEquals(List.of(a), e.needBackup());
        assertEquals(2, tree.devicePages());
        MatchResult m = tree.match(concat(seq(0, 2), seq(100, 2)));
        assertEquals(2, m.devicePages());
        assertEquals(2, m.hostPages(), "b is still reachable below a");
        tree.checkInvariants();
    }

    /**
     * A prefetch protects its anchor on the host while its pages are fetched: device eviction must not delete the
     * anchor, a device leaf never backed up, or the pages landing under it would hang off a node no longer in the tree
     * (counted, unreachable, their slots never freed: RankAgreementModelTest found it as "host pages 36, counted 32").
     */
    @Test
    void deviceEvictionKeepsADeviceOnlyLeafAPrefetchIsAnchoredAt() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode anchor = tree.insert(seq(0, 2), range(0, 2), 1).last();
        tree.protectHost(anchor);
        RadixTree.DeviceEviction e = tree.evictDevice(10, false);
        assertEquals(0, e.freedPages().length, "the anchor stays");
        assertEquals(List.of(), e.deleted());
        int[] all = concat(seq(0, 2), seq(300, 2));
        RadixTree.HostInsert landed = tree.insertHost(
                anchor,
                all,
                2 * PAGE,
                2,
                new int[] {70, 71},
                new PageHasher(PAGE).hashPages(all, 2 * PAGE, 4 * PAGE, anchor.lastHash()));
        assertEquals(0, landed.unusedSlots().length);
        tree.releaseHost(anchor);
        MatchResult m = tree.match(all);
        assertEquals(2, m.devicePages());
        assertEquals(2, m.hostPages(), "the landed pages are reachable below the anchor");
        tree.checkInvariants();
        // Released, the anchor is an ordinary node again: with host-only children and no copy of its own it is handed
        // back to be backed up, as before.
        assertEquals(List.of(anchor), tree.evictDevice(10, false).needBackup());
    }

    @Test
    void writeBackAsksForABackupInsteadOfDeleting() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode n = tree.insert(seq(0, 2), range(0, 2), 0).last();
        RadixTree.DeviceEviction e = tree.evictDevice(2, true);
        assertEquals(0, e.freedPages().length);
        assertEquals(List.of(n), e.needBackup());
        tree.finishBackup(tree.beginBackup(n, new int[] {7, 8}), n, true);
        assertArrayEquals(range(0, 2), tree.demote(n));
        assertTrue(n.backedUp() && !n.onDevice());
        tree.checkInvariants();
    }

    @Test
    void hostEvictionTakesUnprotectedHostOnlyLeavesAndRemovesThem() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode a = tree.insert(seq(0, 2), range(0, 2), 1).last();
        TreeNode b = tree.insert(concat(seq(0, 2), seq(100, 1)), new int[] {0, 1, 2}, 1)
                .last();
        tree.finishBackup(tree.beginBackup(a, new int[] {10, 11}), a, true);
        tree.finishBackup(tree.beginBackup(b, new int[] {12}), b, true);
        assertArrayEquals(new int[0], tree.evictHost(10), "nothing is host-only yet");
        tree.evictDevice(10, false);
        tree.protectHost(a);
        int[] freed = tree.evictHost(10);
        assertArrayEquals(new int[] {12}, freed, "b goes; a is protected");
        assertEquals(0, tree.match(concat(seq(0, 2), seq(100, 1))).lastNode().pages() - 2, "a remains");
        tree.releaseHost(a);
        assertArrayEquals(new int[] {10, 11}, tree.evictHost(10));
        assertEquals(0, tree.nodes());
        assertThrows(IllegalStateException.class, () -> tree.releaseHost(a));
        tree.checkInvariants();
    }

    @Test
    void aBackupInFlightSurvivesASplitAndFinishesOnBothHalves() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode n = tree.insert(seq(0, 4), range(0, 4), 1).last();
        TreeNode.PendingCopy p = tree.beginBackup(n, new int[] {20, 21, 22, 23});
        TreeNode upper = tree.match(concat(seq(0, 1), seq(700, 1))).lastNode();
        assertSame(upper, n.parent());
        assertEquals(2, p.nodes().size());
        assertFalse(upper.backedUp());
        assertEquals(0, tree.evictDevice(10, false).freedPages().length, "pages being copied are not evicted");
        tree.finishBackup(p, n, true);
        assertTrue(upper.backedUp() && n.backedUp());
        assertArrayEquals(new int[] {20}, upper.hostSlots());
        tree.checkInvariants();
    }

    @Test
    void aFailedLoadGivesTheDevicePagesBack() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode n = tree.insert(seq(0, 2), range(0, 2), 1).last();
        tree.finishBackup(tree.beginBackup(n, new int[] {5, 6}), n, true);
        tree.evictDevice(2, false);
        MatchResult m = tree.match(seq(0, 2));
        assertEquals(2, m.hostPages());
        List<TreeNode> path = tree.evictedPath(m.lastDeviceNode(), m.lastNode());
        TreeNode.PendingCopy load = tree.beginLoad(path, new int[] {40, 41});
        assertEquals(2, tree.match(seq(0, 2)).devicePages(), "a loading node counts as on the device");
        assertArrayEquals(new int[] {40, 41}, tree.finishLoad(load, path.getLast(), false));
        assertNull(n.devicePages());
        tree.checkInvariants();
    }

    @Test
    void prefetchedPagesLandAsHostOnlyNodesWithoutDuplicates() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LRU);
        TreeNode anchor = tree.insert(seq(0, 2), range(0, 2), 1).last();
        tree.finishBackup(tree.beginBackup(anchor, new int[] {1, 2}), anchor, true);
        // One page past the anchor is already cached (on the device only).
        tree.insert(concat(seq(0, 2), seq(300, 1)), new int[] {0, 1, 9}, 1);
        int[] all = concat(seq(0, 2), seq(300, 3));
        PageHasher h = new PageHasher(PAGE);
        RadixTree.HostInsert first = tree.insertHost(
                anchor,
                all,
                2 * PAGE,
                3,
                new int[] {70, 71, 72},
                h.hashPages(all, 2 * PAGE, 5 * PAGE, anchor.lastHash()));
        assertArrayEquals(new int[0], first.unusedSlots(), "the device-only page took the fetched copy");
        assertEquals(2, first.storedOnHost().size(), "the device-only node, then the new host-only leaf");
        assertEquals(1, first.storedOnHost().get(0).pages());
        assertEquals(2, first.storedOnHost().get(1).pages());
        assertTrue(first.storedOnHost().get(1).devicePages() == null);
        MatchResult m = tree.match(all);
        assertEquals(3, m.devicePages());
        assertEquals(2, m.hostPages());
        RadixTree.HostInsert again = tree.insertHost(
                anchor,
                all,
                2 * PAGE,
                3,
                new int[] {80, 81, 82},
                h.hashPages(all, 2 * PAGE, 5 * PAGE, anchor.lastHash()));
        assertArrayEquals(new int[] {80, 81, 82}, again.unusedSlots());
        assertTrue(again.storedOnHost().isEmpty(), "nothing new took host slots");
        tree.checkInvariants();
    }

    @Test
    void lfuEvictsTheLeastHitFirst() {
        RadixTree tree = new RadixTree(PAGE, EvictionPolicy.LFU);
        TreeNode hot = tree.insert(seq(0, 1), new int[] {0}, 1).last();
        TreeNode cold = tree.insert(seq(100, 1), new int[] {1}, 1).last();
        tree.insert(seq(0, 1), new int[] {0}, 1);
        tree.insert(seq(0, 1), new int[] {0}, 1);
        tree.match(seq(100, 1)); // most recent, but hit once only
        assertArrayEquals(new int[] {1}, tree.evictDevice(1, false).freedPages());
        assertTrue(hot.onDevice());
        assertFalse(cold.onDevice());
    }

    @Test
    void pagesOfOneTokenKeyChildrenByTheToken() {
        RadixTree tree = new RadixTree(1, EvictionPolicy.LRU);
        tree.insert(new int[] {5, 6, 7}, new int[] {0, 1, 2}, 1);
        tree.insert(new int[] {5, 8}, new int[] {0, 3}, 1);
        assertEquals(2, tree.match(new int[] {5, 8, 9}).devicePages());
        assertEquals(3, tree.match(new int[] {5, 6, 7}).devicePages());
        tree.checkInvariants();
    }
}
