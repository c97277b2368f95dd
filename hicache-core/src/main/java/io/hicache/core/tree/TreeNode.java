package io.hicache.core.tree;

import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * One run of whole pages in the {@link RadixTree}: its tokens (off the heap), one page hash per page, and where its
 * pages are: {@link #devicePages()} (null once evicted from the device) and {@link #hostSlots()} (null until backed
 * up to the host pool). A node that is on neither tier is removed from the tree.
 *
 * <p>Pins: {@link #lockRef()} counts the requests and copies that need the device pages of this node (a lock on a
 * node is a lock on its whole path to the root); {@link #hostRef()} counts what needs its host slots (a prefetch
 * anchored here, an upload to the page store); a copy in flight ({@link #pending()}) also keeps the node on both
 * tiers.
 *
 * <p>Retention: a node holds a priority class ({@link #priority()}, 0-99) until {@link #retainUntil()} on the tree's
 * clock, after which its effective priority is 0 ({@link #effectivePriority}); each hit moves that deadline on by the
 * node's retention, so a class decays only when the node is idle (SGLang's priority and {@code retention_seconds}).
 * A demoted node ({@link #demoted()}) goes first among nodes of effective priority 0, until its next hit.
 *
 * <p>Not thread-safe: only the tree's owner touches it, under the cache's lock.
 */
public final class TreeNode {
    private static final AtomicLong NEXT_ID = new AtomicLong();

    final long id;

    @Nullable
    TreeNode parent;
    /** Children by {@link RadixTree#pageKey} of their first page; a rare collision chains through {@link #sameKey}. */
    @Nullable
    Map<Long, TreeNode> children;

    @Nullable
    TreeNode sameKey;

    @Nullable
    MemorySegment tokens;

    int pages;

    @Nullable
    PageHashes hashes;

    int @Nullable [] device;
    int @Nullable [] host;
    /** False while the host slots are being written (backup or prefetch in flight): not yet a copy to rely on. */
    boolean hostReady;

    int lockRef;
    int hostRef;
    int hitCount;
    long lastAccess;
    /** The retention class; effective only while {@link #retainUntil} is ahead of the tree's time. */
    int priority;
    /** How long the class holds after a hit, in the tree's milliseconds. */
    long retentionMillis;
    /** The tree time (ms) up to which {@link #priority} holds. */
    long retainUntil;
    /** Superseded by the engine: the first to go among nodes of effective priority 0, until its next hit. */
    boolean demoted;
    /** A device-to-host or host-to-device copy in flight over this node's pages (shared by split halves). */
    @Nullable
    PendingCopy pending;
    /** For the root of an extra key's runs (a LoRA adapter, a cache salt): the key; null for every other node. */
    @Nullable
    String extraKey;
    /** For such a root: the hash its runs' chains start from ({@link PageHasher#extraKeyRoot}). */
    @Nullable
    PageHash chainHash;

    TreeNode() {
        this.id = NEXT_ID.getAndIncrement();
    }

    /** A copy in flight over some nodes' pages; a node split while it runs adds its new half. */
    public static final class PendingCopy {
        final List<TreeNode> nodes = new ArrayList<>(1);
        final boolean toHost;
        private @Nullable Object attachment;

        /** What the owner keeps with the copy (the cache: its device copy, so later readers can wait for it). */
        public @Nullable Object attachment() {
            return attachment;
        }

        public void attach(Object value) {
            attachment = value;
        }

        PendingCopy(boolean toHost) {
            this.toHost = toHost;
        }

        /** True for a backup (device to host), false for a load. */
        public boolean toHost() {
            return toHost;
        }

        /** The nodes it covers now. */
        public List<TreeNode> nodes() {
            return nodes;
        }
    }

    public long id() {
        return id;
    }

    /** The node this one hangs below; never asked of the tree's root, which has none. */
    public TreeNode parent() {
        return Checks.checkNotNull(parent, "the tree's root has no parent");
    }

    /** The tree's root, or the root of an extra key's runs: no pages, and never evicted. */
    public boolean isRoot() {
        return parent == null || extraKey != null;
    }

    /** The extra key whose runs hang below this root; "" for the tree's root, null for a node that is no root. */
    public @Nullable String extraKey() {
        return parent == null ? "" : extraKey;
    }

    /**
     * The hash a child's chain starts from: none below the tree's root, the extra key's root hash below that key's
     * root, else the hash of this node's last page.
     */
    public @Nullable PageHash priorHash() {
        return parent == null ? null : extraKey != null ? chainHash : hashes().last();
    }

    /** Whole pages in this node. */
    public int pages() {
        return pages;
    }

    /** Device pages, one per page, or null when evicted from the device. Not to be modified. */
    public int @Nullable [] devicePages() {
        return device;
    }

    /** Host pool slots, one per page, or null when not backed up. Not to be modified. */
    public int @Nullable [] hostSlots() {
        return host;
    }

    public boolean onDevice() {
        return device != null;
    }

    /** True when the host holds a finished copy of every page. */
    public boolean backedUp() {
        return host != null && hostReady;
    }

    /** The page hashes of this node's pages; a root has none (it has no pages). */
    public PageHashes hashes() {
        return Checks.checkNotNull(hashes, "a root has no page hashes");
    }

    /** The hash of the last page: where a child's chain starts. */
    public PageHash lastHash() {
        return hashes().last();
    }

    public int lockRef() {
        return lockRef;
    }

    public int hostRef() {
        return hostRef;
    }

    public int hitCount() {
        return hitCount;
    }

    public long lastAccess() {
        return lastAccess;
    }

    /** The retention class this node was given (0-99), whether or not it still holds. */
    public int priority() {
        return priority;
    }

    /** The tree time (ms) up to which {@link #priority()} holds, unless a hit moves it on. */
    public long retainUntil() {
        return retainUntil;
    }

    /** The priority eviction goes by at tree time {@code now}: the class while it holds, else 0. */
    public int effectivePriority(long now) {
        return now < retainUntil ? priority : 0;
    }

    /** Whether the engine demoted this node and no request has hit it since. */
    public boolean demoted() {
        return demoted;
    }

    /** The copy in flight over this node, or null. */
    public @Nullable PendingCopy pending() {
        return pending;
    }

    /** This node's tokens; a root has none. */
    MemorySegment tokensOf() {
        return Checks.checkNotNull(tokens, "a root has no tokens");
    }

    /** The token at {@code index} of this node. */
    public int token(int index) {
        return tokensOf().getAtIndex(ValueLayout.JAVA_INT, index);
    }

    /** A copy of this node's tokens, {@code pages * pageSize} of them. */
    public int[] tokenIds() {
        return tokensOf().toArray(ValueLayout.JAVA_INT);
    }

    /** Children, in no particular order (collisions included). */
    public Collection<TreeNode> children() {
        if (children == null || children.isEmpty()) {
            return List.of();
        }
        List<TreeNode> all = new ArrayList<>(children.size());
        for (TreeNode c : children.values()) {
            for (TreeNode n = c; n != null; n = n.sameKey) {
                all.add(n);
            }
        }
        return all;
    }

    boolean hasChildren() {
        return children != null && !children.isEmpty();
    }

    void addChild(long key, TreeNode child) {
        if (children == null) {
            children = new HashMap<>(4);
        }
        child.sameKey = children.put(key, child);
        child.parent = this;
    }

    void removeChild(long key, TreeNode child) {
        Map<Long, TreeNode> children = Checks.checkNotNull(this.children, "a node without children");
        TreeNode head = children.get(key);
        if (head == child) {
            if (child.sameKey == null) {
                children.remove(key);
            } else {
                children.put(key, child.sameKey);
            }
        } else {
            TreeNode n = head;
            while (n != null && n.sameKey != child) {
                n = n.sameKey;
            }
            if (n != null) {
                n.sameKey = child.sameKey;
            }
        }
        child.sameKey = null;
    }

    @Override
    public String toString() {
        return "TreeNode#" + id + "[" + pages + " pages, " + (device != null ? "device" : "-")
                + (host != null ? (hostReady ? "+host" : "+host(pending)") : "") + ", lock " + lockRef + ", hostRef "
                + hostRef + (priority > 0 ? ", priority " + priority + " until " + retainUntil : "")
                + (demoted ? ", demoted" : "") + "]";
    }
}
