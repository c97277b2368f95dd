package io.hicache.core.tree;

import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The page-aligned radix tree over token ids behind HiCache, with SGLang HiRadixCache's semantics: a node is on the
 * device (D), on the device and backed up to the host (D+H), or on the host only (H); device eviction is leaf-first
 * and demotes backed-up nodes to H and deletes the rest, so along every path the evicted nodes form a suffix; host
 * eviction removes H leaves nobody protects. Matching splits a node where a match ends inside it. Each page carries
 * its chained page hash, computed at insert.
 *
 * <p>Eviction order, on either tier: among the leaves of that tier (leaf-first, so a cached prefix never has a hole),
 * the lowest effective priority first (a request's priority class while its retention holds, else 0; see
 * {@link TreeNode}), then demoted nodes, then the policy's order (LRU or LFU). Retention is measured on the tree's
 * own clock ({@link #time()}), which only its owner moves ({@link #advanceTime}): the cache moves it at points where
 * tensor-parallel ranks agree on the time, so that every rank evicts the same.
 *
 * <p>A data structure only: it decides and records which slots belong to which node; the cache allocates slots,
 * copies bytes and frees what the tree hands back. Not thread-safe: its owner serialises every call (the cache's
 * lock). Token runs live off the heap, so the tree's heap use per cached page is the page's hash, its device page
 * and its host slot (about 40 bytes) plus each node's share of its fixed cost.
 */
public final class RadixTree {
    /** The child key of every extra key's root under the root (chained; matching never descends into them). */
    private static final long KEY_ROOT_CHILD_KEY = 0x6B6579526F6F7473L;

    /** The highest retention priority a request may give (SGLang's range is 0-99). */
    public static final int MAX_PRIORITY = 99;

    private final int pageSize;
    private final EvictionPolicy policy;
    private final PageHasher hasher;
    private final TreeNode root = new TreeNode();
    /** The roots of extra keys' runs, children of the root; one per extra key seen, never removed. */
    private final Map<String, TreeNode> keyRoots = new HashMap<>();

    /** The recency counter: one tick per walk (match, insert), what LRU orders by. */
    private long clock;
    /** The tree's time in milliseconds, which retention deadlines are measured on; moved only by its owner. */
    private long timeMillis;

    private long devicePages;
    private long evictableDevicePages;
    private long hostPages;
    private long nodes;

    public RadixTree(int pageSizeTokens, EvictionPolicy policy) {
        this.pageSize = Checks.checkPositive(pageSizeTokens, "pageSizeTokens");
        this.policy = Checks.checkNotNull(policy, "policy");
        this.hasher = new PageHasher(pageSizeTokens);
        root.tokens = MemorySegment.NULL;
        root.hashes = PageHashes.empty();
        root.device = new int[0];
        root.lockRef = 1; // the root is never evicted
    }

    public int pageSize() {
        return pageSize;
    }

    public TreeNode root() {
        return root;
    }

    /**
     * The node the runs of requests with {@code extraKey} hang from: the root for "" (no extra key), else that key's
     * own root, a child of the root made on first use. Runs under two extra keys never share a node, and their page
     * hashes chain from different roots ({@link PageHasher#extraKeyRoot}), as SGLang keys its tree by extra key.
     */
    public TreeNode rootFor(String extraKey) {
        Checks.checkNotNull(extraKey, "extraKey");
        if (extraKey.isEmpty()) {
            return root;
        }
        TreeNode r = keyRoots.get(extraKey);
        if (r == null) {
            r = new TreeNode();
            r.tokens = MemorySegment.NULL;
            r.hashes = PageHashes.empty();
            r.device = new int[0];
            r.lockRef = 1; // never evicted, like the root
            r.extraKey = extraKey;
            r.chainHash = PageHasher.extraKeyRoot(extraKey);
            root.addChild(KEY_ROOT_CHILD_KEY, r);
            keyRoots.put(extraKey, r);
        }
        return r;
    }

    /* ---------------------------------------------------------------- retention */

    /** The tree's time in milliseconds: what retention deadlines are compared with. */
    public long time() {
        return timeMillis;
    }

    /** Moves the tree's time on to {@code millis}; a time earlier than the tree's is ignored (it never goes back). */
    public void advanceTime(long millis) {
        timeMillis = Math.max(timeMillis, millis);
    }

    /**
     * A hit on {@code n} by a request of class {@code priority} retained for {@code retentionMillis}: a class that
     * decayed is forgotten; then the node keeps the higher of the two classes and the longer of the two retentions,
     * and in every case its deadline moves to now plus its retention (a hit refreshes); a demoted node is demoted no
     * longer. So no request's class decays on a node sooner than that request asked. A class without retention never
     * holds, so it counts as 0.
     */
    private void retain(TreeNode n, int priority, long retentionMillis) {
        if (n.retainUntil <= timeMillis) {
            n.priority = 0;
            n.retentionMillis = 0;
        }
        if (priority > 0 && retentionMillis > 0) {
            n.priority = Math.max(n.priority, priority);
            n.retentionMillis = Math.max(n.retentionMillis, retentionMillis);
        }
        n.retainUntil = n.priority == 0 ? 0 : saturatedAdd(timeMillis, n.retentionMillis);
        n.demoted = false;
    }

    private static long saturatedAdd(long a, long b) {
        long sum = a + b;
        return ((a ^ sum) & (b ^ sum)) < 0 ? Long.MAX_VALUE : sum;
    }

    /**
     * The order leaves of a tier are evicted in, at the tree's time now: lowest effective priority first, then
     * demoted nodes, then the policy's order.
     */
    private Comparator<TreeNode> evictionOrder() {
        long now = timeMillis;
        return Comparator.comparingInt((TreeNode n) -> n.effectivePriority(now))
                .thenComparingInt(n -> n.demoted ? 0 : 1)
                .thenComparingLong(policy::priority);
    }

    /**
     * Demotes the cached pages of {@code tokens} past their first {@code keepPages} whole pages, and every page
     * cached below the end of {@code tokens} (runs that continue them, which leaf-first eviction would otherwise keep
     * in place above them): each such node's class is dropped to 0 and it goes first among nodes of effective
     * priority 0, until a request hits it again. Where {@code tokens} part from the cache inside a node, only the
     * matched part is demoted (the node is split there, as a match would), and nothing below it. The pages of
     * {@code tokens} before {@code keepPages}, and runs that branch off before the end of {@code tokens}, are left
     * alone. Counts as no hit: recency and deadlines are unchanged.
     *
     * @return the pages demoted (each node's pages, on whichever tiers it is)
     */
    public int demotePriority(String extraKey, int[] tokens, int keepPages) {
        Checks.requireArgument(
                keepPages >= 0 && keepPages <= tokens.length / pageSize,
                "keepPages %s is not within the %s whole pages of tokens",
                keepPages,
                tokens.length / pageSize);
        TreeNode start = extraKey.isEmpty() ? root : keyRoots.get(extraKey);
        if (start == null) {
            return 0; // no request ever used this extra key
        }
        MemorySegment query = MemorySegment.ofArray(tokens);
        int total = tokens.length / pageSize;
        TreeNode node = start;
        int at = 0;
        int demoted = 0;
        while (at < total) {
            TreeNode child = child(node, tokens, at);
            if (child == null) {
                break; // tokens part from the cache at a node's start
            }
            int same = samePages(child, query, at, total - at);
            if (same < child.pages && same < total - at) {
                child = split(child, same); // tokens part from it inside: only the matched part is theirs
            }
            // Either the whole node matched, or tokens end inside it and the rest of it continues them.
            if (at < keepPages && at + child.pages > keepPages) {
                child = split(child, keepPages - at); // the kept part; the next step finds the rest below it
            }
            if (at >= keepPages) {
                demoted += demoteNode(child);
            }
            node = child;
            at += Math.min(same, child.pages);
        }
        if (at == total && node != start) {
            // every page of tokens is cached: what hangs below their end continues them, and goes with them
            List<TreeNode> below = new ArrayList<>();
            collectPostOrder(node, below);
            below.remove(below.size() - 1); // the node itself, handled above
            for (TreeNode d : below) {
                demoted += demoteNode(d);
            }
        }
        return demoted;
    }

    private static int demoteNode(TreeNode n) {
        n.priority = 0;
        n.retentionMillis = 0;
        n.retainUntil = 0;
        n.demoted = true;
        return n.pages;
    }

    /**
     * How many of {@code tokens}' whole pages, from the first, the device holds, and how many the host holds (a
     * finished copy of each page): a read-only walk that splits nothing, touches no recency and pins nothing.
     */
    public record HeldPages(int devicePages, int hostPages) {}

    /** See {@link HeldPages}; among the runs of {@code extraKey} ("" for none). */
    public HeldPages heldPages(String extraKey, int[] tokens) {
        TreeNode node = extraKey.isEmpty() ? root : keyRoots.get(extraKey);
        if (node == null) {
            return new HeldPages(0, 0);
        }
        MemorySegment query = MemorySegment.ofArray(tokens);
        int total = tokens.length / pageSize;
        int at = 0;
        int device = 0;
        int host = 0;
        boolean onDevice = true;
        boolean onHost = true;
        while (at < total && (onDevice || onHost)) {
            TreeNode child = child(node, tokens, at);
            if (child == null) {
                break;
            }
            int same = samePages(child, query, at, total - at);
            onDevice &= child.device != null;
            onHost &= child.backedUp();
            device += onDevice ? same : 0;
            host += onHost ? same : 0;
            if (same < child.pages) {
                break;
            }
            node = child;
            at += same;
        }
        return new HeldPages(device, host);
    }

    /* ---------------------------------------------------------------- match */

    /** The longest cached prefix of {@code tokens}' whole pages; splits the node where the match ends inside one. */
    public MatchResult match(int[] tokens) {
        return match("", tokens);
    }

    /** As {@link #match(int[])}, among the runs of {@code extraKey} ("" for none). */
    public MatchResult match(String extraKey, int[] tokens) {
        return match(extraKey, tokens, 0, 0);
    }

    /**
     * As {@link #match(String, int[])} for a request of retention class {@code priority} held {@code retentionMillis}
     * after each hit: a hit of that class on every matched node (the node keeps the higher class and the longer
     * retention, and its deadline moves to now plus its retention; see {@link TreeNode}).
     */
    public MatchResult match(String extraKey, int[] tokens, int priority, long retentionMillis) {
        MemorySegment query = MemorySegment.ofArray(tokens);
        int total = tokens.length / pageSize;
        long now = ++clock;
        TreeNode start = rootFor(extraKey);
        TreeNode node = start;
        TreeNode lastDevice = start;
        TreeNode lastHost = start;
        @Nullable int device = 0;
        @Nullable int host = 0;
        int at = 0;
        while (at < total) {
            TreeNode child = descend(node, tokens, query, at, total - at, now, priority, retentionMillis);
            if (child == null) {
                break;
            }
            int same = child.pages;
            node = child;
            at += same;
            if (child.device != null) {
                device += same;
                lastDevice = child;
            } else {
                host += same;
            }
            if (child.backedUp()) {
                lastHost = child;
            }
        }
        return new MatchResult(device, host, lastDevice, lastHost, node);
    }

    /** The device pages of the path from the root down to {@code last}, which must be on the device. */
    public int[] devicePagesTo(TreeNode last) {
        int count = 0;
        for (TreeNode n = last; n != root; n = n.parent()) {
            Checks.requireState(n.device != null, "%s is not on the device", n);
            count += n.pages;
        }
        int[] out = new int[count];
        for (TreeNode n = last; n != root; n = n.parent()) {
            count -= n.pages;
            System.arraycopy(n.device, 0, out, count, n.pages);
        }
        return out;
    }

    /** The host-only nodes from below {@code lastDevice} down to {@code last}, top first: what a load-back brings. */
    public List<TreeNode> evictedPath(TreeNode lastDevice, TreeNode last) {
        List<TreeNode> path = new ArrayList<>();
        for (TreeNode n = last; n != lastDevice && n != root; n = n.parent()) {
            Checks.requireState(n.device == null, "%s is on the device below the last device node", n);
            path.add(n);
        }
        Collections.reverse(path);
        return path;
    }

    /* ---------------------------------------------------------------- insert */

    /**
     * What an {@link #insert} did: the last node of the path, the given pages the tree did not take, the nodes due a
     * backup, how many pages the new leaf has, and every node that took device pages (evicted nodes computed again,
     * and the new leaf), top first.
     */
    public record InsertResult(
            TreeNode last,
            int[] duplicatePages,
            List<TreeNode> backupCandidates,
            int newPages,
            List<TreeNode> storedOnDevice) {}

    /**
     * Caches {@code tokens}' whole pages, whose KV is in {@code devicePages} (one per page). Matched nodes that were
     * evicted take the given pages (the KV was computed again); matched nodes on the device keep theirs, and the given
     * pages that differ come back as duplicates for the caller to free; the rest becomes a new leaf. With
     * {@code hitThreshold} above 0, matched device nodes and the new leaf count a hit, and those at the threshold
     * that are not backed up come back as backup candidates (write-through policies); 0 counts nothing (write-back,
     * or a chunk of an unfinished request).
     */
    public InsertResult insert(int[] tokens, int[] devicePages, int hitThreshold) {
        return insert("", tokens, devicePages, hitThreshold);
    }

    /** As {@link #insert(int[], int[], int)}, among the runs of {@code extraKey} ("" for none). */
    public InsertResult insert(String extraKey, int[] tokens, int[] devicePages, int hitThreshold) {
        return insert(extraKey, tokens, devicePages, hitThreshold, 0, 0);
    }

    /**
     * As {@link #insert(String, int[], int[], int)} for a request of retention class {@code priority} held
     * {@code retentionMillis} after each hit: a hit of that class on every node of the path and on the new leaf, as in
     * {@link #match(String, int[], int, long)}.
     */
    public InsertResult insert(
            String extraKey, int[] tokens, int[] devicePages, int hitThreshold, int priority, long retentionMillis) {
        int total = tokens.length / pageSize;
        Checks.requireArgument(
                devicePages.length == total, "%d device pages for %d whole pages of tokens", devicePages.length, total);
        MemorySegment query = MemorySegment.ofArray(tokens);
        long now = ++clock;
        List<TreeNode> candidates = new ArrayList<>();
        List<TreeNode> stored = new ArrayList<>(1);
        int[] dup = new int[total];
        int dups = 0;
        TreeNode node = rootFor(extraKey);
        int at = 0;
        while (at < total) {
            TreeNode child = descend(node, tokens, query, at, total - at, now, priority, retentionMillis);
            if (child == null) {
                break;
            }
            int same = child.pages;
            if (child.device == null) {
                giveDevice(child, Arrays.copyOfRange(devicePages, at, at + same));
                stored.add(child);
            } else {
                for (int i = 0; i < same; i++) {
                    if (child.device[i] != devicePages[at + i]) {
                        dup[dups++] = devicePages[at + i];
                    }
                }
                countHit(child, hitThreshold, candidates);
            }
            node = child;
            at += same;
        }
        int added = 0;
        if (at < total) {
            TreeNode leaf = newNode(tokens, at, total - at, node);
            leaf.lastAccess = now;
            retain(leaf, priority, retentionMillis);
            giveDevice(leaf, Arrays.copyOfRange(devicePages, at, total));
            stored.add(leaf);
            added = leaf.pages;
            countHit(leaf, hitThreshold, candidates);
            node = leaf;
        }
        return new InsertResult(node, Arrays.copyOf(dup, dups), candidates, added, stored);
    }

    private static void countHit(TreeNode n, int threshold, List<TreeNode> candidates) {
        if (threshold <= 0) {
            return;
        }
        n.hitCount++;
        if (n.hitCount >= threshold && n.host == null && n.device != null && n.pending == null) {
            candidates.add(n);
        }
    }

    /**
     * What an {@link #insertHost} did: the given host slots the tree did not take, and the nodes that took host slots
     * (device-only nodes that became D+H, and the new host-only leaf), top first.
     */
    public record HostInsert(int[] unusedSlots, List<TreeNode> storedOnHost) {}

    /**
     * Inserts pages fetched into the host pool as host-only nodes under {@code anchor} (a prefetch's landing): the
     * pages of {@code tokens[from ..]} already in the tree keep their own copy, and the given slots for them come back
     * for the caller to free.
     */
    public HostInsert insertHost(
            TreeNode anchor, int[] tokens, int from, int pages, int[] hostSlots, PageHashes hashes) {
        Checks.requireArgument(
                hostSlots.length == pages && hashes.size() == pages,
                "%d pages, %d slots, %d hashes",
                pages,
                hostSlots.length,
                hashes.size());
        MemorySegment query = MemorySegment.ofArray(tokens);
        long now = ++clock;
        int fromPage = from / pageSize;
        int end = fromPage + pages;
        int[] unused = new int[pages];
        int unusedCount = 0;
        List<TreeNode> stored = new ArrayList<>(1);
        TreeNode node = anchor;
        int at = fromPage;
        while (at < end) {
            TreeNode child = descend(node, tokens, query, at, end - at, now, 0, 0);
            if (child == null) {
                break;
            }
            int same = child.pages;
            if (child.host == null && child.device != null && child.pending == null) {
                // On the device only: the fetched copy makes it D+H.
                child.host = Arrays.copyOfRange(hostSlots, at - fromPage, at - fromPage + same);
                child.hostReady = true;
                hostPages += same;
                stored.add(child);
            } else {
                System.arraycopy(hostSlots, at - fromPage, unused, unusedCount, same);
                unusedCount += same;
            }
            node = child;
            at += same;
        }
        if (at < end) {
            TreeNode leaf = newNode(tokens, at * pageSize, end - at, node, hashes.slice(at - fromPage, pages));
            leaf.lastAccess = now;
            leaf.host = Arrays.copyOfRange(hostSlots, at - fromPage, pages);
            leaf.hostReady = true;
            hostPages += leaf.pages;
            stored.add(leaf);
        }
        return new HostInsert(Arrays.copyOf(unused, unusedCount), stored);
    }

    /* ---------------------------------------------------------------- pins */

    /** Pins the device pages of {@code node} and its ancestors. */
    public void lock(TreeNode node) {
        for (TreeNode n = node; n != root; n = n.parent()) {
            if (n.lockRef++ == 0 && n.device != null) {
                evictableDevicePages -= n.pages;
            }
        }
    }

    /** Undoes one {@link #lock}. */
    public void unlock(TreeNode node) {
        for (TreeNode n = node; n != root; n = n.parent()) {
            Checks.requireState(n.lockRef > 0, "%s is not locked", n);
            if (--n.lockRef == 0 && n.device != null) {
                evictableDevicePages += n.pages;
            }
        }
    }

    /** Pins the host slots of {@code node} against host eviction. */
    public void protectHost(TreeNode node) {
        node.hostRef++;
    }

    /** Undoes one {@link #protectHost}. */
    public void releaseHost(TreeNode node) {
        Checks.requireState(node.hostRef > 0, "%s is not protected", node);
        node.hostRef--;
    }

    /* ---------------------------------------------------------------- copies */

    /**
     * Starts a backup of {@code node} into {@code hostSlots}: records them (not ready yet), and locks the node so its
     * device pages stay until the copy is done.
     */
    public TreeNode.PendingCopy beginBackup(TreeNode node, int[] hostSlots) {
        Checks.requireState(
                node.device != null && node.host == null && node.pending == null, "%s cannot be backed up now", node);
        Checks.requireArgument(hostSlots.length == node.pages, "%d slots for %d pages", hostSlots.length, node.pages);
        TreeNode.PendingCopy p = new TreeNode.PendingCopy(true);
        p.nodes.add(node);
        node.pending = p;
        node.host = hostSlots.clone();
        node.hostReady = false;
        hostPages += node.pages;
        lock(node);
        return p;
    }

    /**
     * Ends a backup: on success every node it covers (a split adds halves) is backed up; on failure they lose the
     * slots, which are returned for the caller to release. Unlocks {@code lockedNode}, the node it locked.
     */
    public int[] finishBackup(TreeNode.PendingCopy p, TreeNode lockedNode, boolean ok) {
        Checks.requireArgument(p.toHost, "not a backup");
        int[] slots = new int[0];
        for (TreeNode n : p.nodes) {
            n.pending = null;
            if (ok) {
                n.hostReady = true;
            } else {
                int at = slots.length;
                slots = Arrays.copyOf(slots, at + n.pages);
                System.arraycopy(n.host, 0, slots, at, n.pages);
                n.host = null;
                n.hostReady = false;
                hostPages -= n.pages;
            }
        }
        unlock(lockedNode);
        return slots;
    }

    /**
     * Starts loading host-only {@code path} (top first, hanging under a device node) into {@code devicePages}: the
     * nodes get the pages now and the path is locked; while the load is pending no node of it is evicted from
     * either tier.
     */
    public TreeNode.PendingCopy beginLoad(List<TreeNode> path, int[] devicePages) {
        TreeNode.PendingCopy p = new TreeNode.PendingCopy(false);
        int at = 0;
        for (TreeNode n : path) {
            Checks.requireState(n.device == null && n.backedUp() && n.pending == null, "%s cannot be loaded now", n);
            p.nodes.add(n);
            n.pending = p;
            giveDevice(n, Arrays.copyOfRange(devicePages, at, at + n.pages));
            at += n.pages;
        }
        Checks.requireArgument(at == devicePages.length, "%d device pages for %d pages", devicePages.length, at);
        lock(path.getLast());
        return p;
    }

    /**
     * Ends a load: unlocks {@code lockedNode}; on failure the nodes lose their device pages again, which are
     * returned for the caller to free.
     */
    public int[] finishLoad(TreeNode.PendingCopy p, TreeNode lockedNode, boolean ok) {
        Checks.requireArgument(!p.toHost, "not a load");
        for (TreeNode n : p.nodes) {
            n.pending = null;
        }
        unlock(lockedNode);
        int[] freed = new int[0];
        for (TreeNode n : p.nodes) {
            if (!ok && n.device != null) {
                int at = freed.length;
                freed = Arrays.copyOf(freed, at + n.pages);
                System.arraycopy(n.device, 0, freed, at, n.pages);
                takeDevice(n);
            }
        }
        return freed;
    }

    /* ---------------------------------------------------------------- eviction */

    /**
     * What a device eviction did.
     *
     * @param freedPages the device pages to free
     * @param needBackup nodes to back up before they can go (write-back)
     * @param demoted    hashes of the runs now host-only
     * @param deleted    hashes of the runs removed from the tree
     */
    public record DeviceEviction(
            int[] freedPages, List<TreeNode> needBackup, List<PageHashes> demoted, List<PageHashes> deleted) {}

    /**
     * Frees at least {@code pages} device pages if it can: device leaves in eviction order (effective priority,
     * demoted first, then the policy), skipping locked ones and
     * those with a copy in flight; a backed-up leaf becomes host-only, one that is not is removed, or, when
     * {@code backupFirst} (write-back), is returned to be backed up before it can go.
     */
    public DeviceEviction evictDevice(int pages, boolean backupFirst) {
        return evictDevice(pages, backupFirst, Set.of());
    }

    /**
     * As {@link #evictDevice(int, boolean)}, passing over the nodes in {@code passOver} (ones the caller already
     * tried to back up): a node returned for backup is counted as pages to come only by the caller that starts its
     * backup, so a node whose backup cannot start does not stop eviction of the others.
     */
    public DeviceEviction evictDevice(int pages, boolean backupFirst, Set<TreeNode> passOver) {
        return evictDeviceLeaves(pages, backupFirst, passOver, false);
    }

    /**
     * Demotes device leaves the host also holds, in eviction order, until at least {@code pages} device pages are
     * freed or none is left: what keeps part of the device pool free ahead of need. Removes nothing and asks for no
     * backup: a leaf not backed up yet (or locked, or with a copy in flight) is passed over.
     */
    public DeviceEviction demoteDevice(int pages) {
        return evictDeviceLeaves(pages, false, Set.of(), true);
    }

    private DeviceEviction evictDeviceLeaves(
            int pages, boolean backupFirst, Set<TreeNode> passOver, boolean demoteOnly) {
        PriorityQueue<TreeNode> heap = new PriorityQueue<>(evictionOrder());
        collectDeviceLeaves(root, heap);
        int[] freed = new int[Math.max(0, pages)];
        int count = 0;
        List<TreeNode> needBackup = new ArrayList<>();
        List<PageHashes> demoted = new ArrayList<>();
        List<PageHashes> deleted = new ArrayList<>();
        int promised = 0;
        while (count + promised < pages && !heap.isEmpty()) {
            TreeNode n = heap.poll();
            if (n.lockRef > 0
                    || n.pending != null
                    || n.device == null
                    || passOver.contains(n)
                    || (demoteOnly && !n.backedUp())) {
                continue;
            }
            if (!n.backedUp() && n.hostRef > 0 && !backupFirst) {
                // Removing it would orphan what is anchored here: a prefetch's pages land under it (insertHost).
                continue;
            }
            if (!n.backedUp() && (backupFirst || n.hasChildren())) {
                // Write-back backs it up before it goes; a leaf with host-only children cannot simply be removed.
                needBackup.add(n);
                promised += n.pages;
                continue;
            }
            if (count + n.pages > freed.length) {
                freed = Arrays.copyOf(freed, count + n.pages);
            }
            System.arraycopy(n.device, 0, freed, count, n.pages);
            count += n.pages;
            TreeNode parent = n.parent();
            takeDevice(n);
            if (n.backedUp()) {
                demoted.add(n.hashes);
            } else {
                deleted.add(n.hashes);
                remove(n);
            }
            if (parent != root && parent.device != null && allChildrenEvicted(parent)) {
                heap.add(parent);
            }
        }
        return new DeviceEviction(Arrays.copyOf(freed, count), needBackup, demoted, deleted);
    }

    /**
     * What {@link #dropWithSubtree} removed: the device pages and host slots to free, and the hashes of the runs that
     * left each tier.
     */
    public record Dropped(int[] devicePages, int[] hostSlots, PageHashes deviceRun, List<PageHashes> hostRuns) {}

    /**
     * Removes {@code n}, a device leaf never backed up, with its host-only descendants: what a node that must be
     * backed up before it can be evicted, and cannot be (no host room), does instead of pinning the device forever.
     * Its descendants go too, since without {@code n} no prefix reaches them. Null, with nothing changed, when
     * {@code n} or a descendant is in use (locked, copying, protected on the host).
     */
    public @Nullable Dropped dropWithSubtree(TreeNode n) {
        if (n == root
                || n.device == null
                || n.host != null
                || n.lockRef > 0
                || n.pending != null
                || n.hostRef > 0
                || !allChildrenEvicted(n)) {
            return null;
        }
        List<TreeNode> below = new ArrayList<>();
        collectPostOrder(n, below);
        below.remove(below.size() - 1); // n itself, last
        int hostSlotCount = 0;
        for (TreeNode d : below) {
            if (d.device != null || d.lockRef > 0 || d.pending != null || d.hostRef > 0) {
                return null;
            }
            hostSlotCount += d.host == null ? 0 : d.pages;
        }
        int[] slots = new int[hostSlotCount];
        int at = 0;
        List<PageHashes> hostRuns = new ArrayList<>();
        for (TreeNode d : below) {
            if (d.host != null) {
                System.arraycopy(d.host, 0, slots, at, d.pages);
                at += d.pages;
                hostPages -= d.pages;
                d.host = null;
                hostRuns.add(d.hashes);
            }
            remove(d);
        }
        int[] pages = n.device;
        takeDevice(n);
        remove(n);
        return new Dropped(pages, slots, n.hashes(), hostRuns);
    }

    /**
     * Removes {@code n}, a host-only node whose host pages were found damaged or misnamed, with its descendants (no
     * prefix reaches them without {@code n}): the host slots to free and the runs that left the host. Null, with nothing
     * changed, when {@code n} is not host-only or it or a descendant is in use or on the device.
     */
    public @Nullable HostEviction dropHostWithSubtree(TreeNode n) {
        if (n == root || n.device != null || n.host == null || n.lockRef > 0 || n.pending != null || n.hostRef > 0) {
            return null;
        }
        List<TreeNode> all = new ArrayList<>();
        collectPostOrder(n, all);
        int slotCount = 0;
        for (TreeNode d : all) {
            if (d.device != null || d.lockRef > 0 || d.pending != null || d.hostRef > 0) {
                return null;
            }
            slotCount += d.host == null ? 0 : d.pages;
        }
        int[] slots = new int[slotCount];
        int at = 0;
        List<PageHashes> runs = new ArrayList<>();
        for (TreeNode d : all) { // post-order: children before their parent
            if (d.host != null) {
                System.arraycopy(d.host, 0, slots, at, d.pages);
                at += d.pages;
                hostPages -= d.pages;
                d.host = null;
                runs.add(d.hashes);
            }
            remove(d);
        }
        return new HostEviction(slots, runs);
    }

    private static void collectPostOrder(TreeNode n, List<TreeNode> out) {
        for (TreeNode c : n.children()) {
            collectPostOrder(c, out);
        }
        out.add(n);
    }

    /** Evicts a backed-up node's device pages (after a write-back backup); returns them for the caller to free. */
    public int[] demote(TreeNode n) {
        Checks.requireState(
                n.device != null && n.backedUp() && n.lockRef == 0 && n.pending == null, "%s cannot be demoted", n);
        int[] pages = n.device;
        takeDevice(n);
        return pages;
    }

    /** What a host eviction did: the slots to release, and the hashes of the runs removed. */
    public record HostEviction(int[] freedSlots, List<PageHashes> removed) {}

    /**
     * Frees at least {@code pages} host slots if it can: host-only leaves that nobody protects, in eviction order
     * (effective priority, demoted first, then the policy); each is removed from the tree.
     */
    public int[] evictHost(int pages) {
        return evictHostReporting(pages).freedSlots();
    }

    /** As {@link #evictHost}, saying which runs went. */
    public HostEviction evictHostReporting(int pages) {
        List<PageHashes> removed = new ArrayList<>();
        PriorityQueue<TreeNode> heap = new PriorityQueue<>(evictionOrder());
        collectHostLeaves(root, heap);
        int[] freed = new int[Math.max(0, pages)];
        int count = 0;
        while (count < pages && !heap.isEmpty()) {
            TreeNode n = heap.poll();
            if (!hostEvictable(n)) {
                continue;
            }
            if (count + n.pages > freed.length) {
                freed = Arrays.copyOf(freed, count + n.pages);
            }
            System.arraycopy(n.host, 0, freed, count, n.pages);
            count += n.pages;
            TreeNode parent = n.parent();
            hostPages -= n.pages;
            n.host = null;
            removed.add(n.hashes);
            remove(n);
            if (parent != root && !parent.hasChildren() && hostEvictable(parent)) {
                heap.add(parent);
            }
        }
        return new HostEviction(Arrays.copyOf(freed, count), removed);
    }

    private static boolean hostEvictable(TreeNode n) {
        return n.device == null && n.backedUp() && n.hostRef == 0 && n.pending == null && !n.hasChildren();
    }

    private void collectDeviceLeaves(TreeNode n, PriorityQueue<TreeNode> heap) {
        for (TreeNode c : n.children()) {
            collectDeviceLeaves(c, heap);
        }
        if (n != root && n.device != null && allChildrenEvicted(n)) {
            heap.add(n);
        }
    }

    private void collectHostLeaves(TreeNode n, PriorityQueue<TreeNode> heap) {
        for (TreeNode c : n.children()) {
            collectHostLeaves(c, heap);
        }
        if (n != root && hostEvictable(n)) {
            heap.add(n);
        }
    }

    private static @Nullable boolean allChildrenEvicted(TreeNode n) {
        for (TreeNode c : n.children()) {
            if (c.device != null) {
                return false;
            }
        }
        return true;
    }

    /* ---------------------------------------------------------------- structure */

    /**
     * One step down: the child of {@code node} whose run matches the query from page {@code at} (at most
     * {@code limit} pages), split where the match ends inside it, so the whole returned node matches; null when no
     * child's first page does.
     */
    private @Nullable TreeNode descend(
            TreeNode node,
            int[] tokens,
            MemorySegment query,
            int at,
            int limit,
            long now,
            int priority,
            long retentionMillis) {
        TreeNode child = child(node, tokens, at);
        if (child == null) {
            return null;
        }
        int same = samePages(child, query, at, limit);
        if (same < child.pages) {
            child = split(child, same);
        }
        child.lastAccess = now;
        retain(child, priority, retentionMillis);
        return child;
    }

    private @Nullable TreeNode child(TreeNode node, int[] tokens, int page) {
        if (node.children == null) {
            return null;
        }
        for (TreeNode c = node.children.get(pageKey(tokens, page * pageSize)); c != null; c = c.sameKey) {
            if (c.extraKey == null && firstPageEquals(c, tokens, page * pageSize)) {
                return c;
            }
        }
        return null;
    }

    private boolean firstPageEquals(TreeNode c, int[] tokens, int from) {
        for (int i = 0; i < pageSize; i++) {
            if (c.tokensOf().getAtIndex(ValueLayout.JAVA_INT, i) != tokens[from + i]) {
                return false;
            }
        }
        return true;
    }

    /** Whole pages of {@code node} equal to the query from page {@code at}, at most {@code limit}. */
    private int samePages(TreeNode node, MemorySegment query, int at, int limit) {
        int pages = Math.min(node.pages, limit);
        long bytes = (long) pages * pageSize * Integer.BYTES;
        long from = (long) at * pageSize * Integer.BYTES;
        long mismatch = MemorySegment.mismatch(node.tokens, 0, bytes, query, from, from + bytes);
        return mismatch < 0 ? pages : (int) (mismatch / Integer.BYTES / pageSize);
    }

    /** Splits {@code node} after {@code at} pages; returns the new upper half, which takes its place. */
    private TreeNode split(TreeNode node, int at) {
        TreeNode upper = new TreeNode();
        long cut = (long) at * pageSize * Integer.BYTES;
        upper.tokens = node.tokensOf().asSlice(0, cut);
        upper.pages = at;
        upper.hashes = node.hashes().slice(0, at);
        upper.device = node.device == null ? null : Arrays.copyOfRange(node.device, 0, at);
        upper.host = node.host == null ? null : Arrays.copyOfRange(node.host, 0, at);
        upper.hostReady = node.hostReady;
        upper.lockRef = node.lockRef;
        upper.hitCount = node.hitCount;
        upper.lastAccess = node.lastAccess;
        upper.priority = node.priority;
        upper.retentionMillis = node.retentionMillis;
        upper.retainUntil = node.retainUntil;
        upper.demoted = node.demoted;
        upper.pending = node.pending;
        if (node.pending != null) {
            node.pending.nodes.add(upper);
        }
        TreeNode parent = node.parent();
        parent.removeChild(pageKey(node), node);
        node.tokens = node.tokensOf().asSlice(cut);
        node.pages -= at;
        node.hashes = node.hashes().slice(at, node.hashes().size());
        node.device = node.device == null ? null : Arrays.copyOfRange(node.device, at, node.device.length);
        node.host = node.host == null ? null : Arrays.copyOfRange(node.host, at, node.host.length);
        parent.addChild(pageKey(upper), upper);
        upper.addChild(pageKey(node), node);
        nodes++;
        return upper;
    }

    private TreeNode newNode(int[] tokens, int fromPage, int pages, TreeNode parent) {
        PageHash prior = parent.priorHash();
        PageHashes hashes = prior == null
                ? hasher.hashPages(tokens, fromPage * pageSize, (fromPage + pages) * pageSize)
                : hasher.hashPages(tokens, fromPage * pageSize, (fromPage + pages) * pageSize, prior);
        return newNode(tokens, fromPage * pageSize, pages, parent, hashes);
    }

    private TreeNode newNode(int[] tokens, int fromToken, int pages, TreeNode parent, PageHashes hashes) {
        TreeNode n = new TreeNode();
        long bytes = (long) pages * pageSize * Integer.BYTES;
        n.tokens = Arena.ofAuto().allocate(bytes, Integer.BYTES);
        MemorySegment.copy(tokens, fromToken, n.tokens, ValueLayout.JAVA_INT, 0, pages * pageSize);
        n.pages = pages;
        n.hashes = hashes;
        parent.addChild(pageKey(n), n);
        nodes++;
        return n;
    }

    private void remove(TreeNode n) {
        Checks.requireState(!n.hasChildren() && n.device == null && n.host == null, "%s cannot be removed", n);
        n.parent().removeChild(pageKey(n), n);
        nodes--;
    }

    private void giveDevice(TreeNode n, int[] pages) {
        n.device = pages;
        devicePages += n.pages;
        if (n.lockRef == 0) {
            evictableDevicePages += n.pages;
        }
    }

    private void takeDevice(TreeNode n) {
        n.device = null;
        devicePages -= n.pages;
        if (n.lockRef == 0) {
            evictableDevicePages -= n.pages;
        }
    }

    /** The child key of a run starting at {@code tokens[from]}: a 64-bit mix of its first page (the token itself for pages of 1). */
    long pageKey(int[] tokens, int from) {
        if (pageSize == 1) {
            return tokens[from];
        }
        long h = 0x9E3779B97F4A7C15L;
        for (int i = 0; i < pageSize; i++) {
            h = (h ^ (tokens[from + i] & 0xFFFFFFFFL)) * 0xBF58476D1CE4E5B9L;
            h ^= h >>> 29;
        }
        return h;
    }

    private long pageKey(TreeNode n) {
        if (n.extraKey != null) {
            return KEY_ROOT_CHILD_KEY;
        }
        if (pageSize == 1) {
            return n.tokensOf().getAtIndex(ValueLayout.JAVA_INT, 0);
        }
        long h = 0x9E3779B97F4A7C15L;
        for (int i = 0; i < pageSize; i++) {
            h = (h ^ (n.tokensOf().getAtIndex(ValueLayout.JAVA_INT, i) & 0xFFFFFFFFL)) * 0xBF58476D1CE4E5B9L;
            h ^= h >>> 29;
        }
        return h;
    }

    /* ---------------------------------------------------------------- accounting */

    /** Device pages held by the tree. */
    public long devicePages() {
        return devicePages;
    }

    /** Device pages no lock holds: what eviction could free. */
    public long evictableDevicePages() {
        return evictableDevicePages;
    }

    /** Host slots held by the tree (including backups in flight). */
    public long hostPages() {
        return hostPages;
    }

    /** Nodes in the tree, without the root. */
    public long nodes() {
        return nodes;
    }

    /**
     * Checks the tree's invariants and returns its slots, for tests: evicted nodes form a suffix of every path, a
     * node is on some tier, pins are never negative and a node's lock count covers its children's, child keys match,
     * hashes chain, and the counters add up.
     *
     * @throws IllegalStateException naming the first broken invariant
     */
    public Slots checkInvariants() {
        return checkInvariants(true);
    }

    /** As {@link #checkInvariants()}; {@code hashes} false skips re-hashing each node's first page (the costly part). */
    public Slots checkInvariants(boolean hashes) {
        Slots slots = new Slots(new ArrayList<>(), new ArrayList<>());
        long[] totals = new long[3];
        check(root, slots, totals, hashes);
        Checks.requireState(totals[0] == devicePages, "device pages %d, counted %d", devicePages, totals[0]);
        Checks.requireState(
                totals[1] == evictableDevicePages, "evictable pages %d, counted %d", evictableDevicePages, totals[1]);
        Checks.requireState(totals[2] == hostPages, "host pages %d, counted %d", hostPages, totals[2]);
        return slots;
    }

    /** Every device page and host slot the tree holds. */
    public record Slots(List<Integer> device, List<Integer> host) {}

    private void check(TreeNode n, Slots slots, long[] totals, boolean hashes) {
        for (TreeNode c : n.children()) {
            Checks.requireState(c.parent == n, "%s has the wrong parent", c);
            if (c.extraKey != null) {
                Checks.requireState(
                        n == root && keyRoots.get(c.extraKey) == c && c.pages == 0 && c.lockRef > 0,
                        "%s is not a proper root of extra key runs",
                        c);
                check(c, slots, totals, hashes);
                continue;
            }
            Checks.requireState(c.device != null || c.host != null, "%s is on no tier", c);
            Checks.requireState(
                    n.isRoot() || n.device != null || c.device == null,
                    "%s is on the device under an evicted parent",
                    c);
            Checks.requireState(c.lockRef >= 0 && c.hostRef >= 0, "%s has a negative pin", c);
            Checks.requireState(
                    c.priority >= 0 && c.priority <= MAX_PRIORITY && (c.priority > 0 || c.retainUntil == 0),
                    "%s has a retention class out of range",
                    c);
            Checks.requireState(n.isRoot() || n.lockRef >= c.lockRef, "%s is locked more than its parent", c);
            Checks.requireState(
                    c.pages > 0 && c.hashes().size() == c.pages,
                    "%s has %d hashes",
                    c,
                    c.hashes().size());
            if (hashes) {
                PageHash prior = n.priorHash();
                int[] first = new int[pageSize];
                for (int i = 0; i < pageSize; i++) {
                    first[i] = c.token(i);
                }
                PageHashes expect =
                        prior == null ? hasher.hashPages(first) : hasher.hashPages(first, 0, pageSize, prior);
                Checks.requireState(expect.get(0).equals(c.hashes().get(0)), "%s does not chain from its parent", c);
            }
            if (c.device != null) {
                totals[0] += c.pages;
                if (c.lockRef == 0) {
                    totals[1] += c.pages;
                }
                for (int p : c.device) {
                    slots.device().add(p);
                }
            }
            if (c.host != null) {
                totals[2] += c.pages;
                for (int s : c.host) {
                    slots.host().add(s);
                }
            }
            check(c, slots, totals, hashes);
        }
    }
}
