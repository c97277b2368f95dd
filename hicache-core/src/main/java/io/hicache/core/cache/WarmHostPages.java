package io.hicache.core.cache;

import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.tree.MatchResult;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.tree.TreeNode;
import java.util.Arrays;
import java.util.BitSet;
import org.jspecify.annotations.Nullable;

/**
 * Host pages an earlier run left that no node owns yet (the host pool reopened warm after a restart or a crash): a
 * request whose prompt leads to them adopts them into the tree as host-only nodes ({@link #adopt}); the rest are the
 * first to go when the host needs room. Not thread-safe: every method is called with the cache's lock held.
 */
final class WarmHostPages {
    /** Pages hashed at a time when looking a prompt's tail up among them. */
    private static final int HASH_BATCH_PAGES = 64;

    private final CacheCore cache;
    private final BitSet slots = new BitSet();
    /** For ranks that agree: whether any rank reopened with leftovers (asked once, at the first request); else null. */
    private @Nullable Boolean anyRankHasThem;

    /** The ready pages of {@code cache}'s host pool as it opened (none for a cache without one). */
    WarmHostPages(CacheCore cache) {
        this.cache = cache;
        if (cache.host != null) {
            cache.host().forEachReady((slot, key) -> slots.set(slot));
        }
    }

    /** Their slots, for the consistency check. */
    BitSet slots() {
        return slots;
    }

    /** How many there are. */
    int count() {
        return slots.cardinality();
    }

    /** Releases up to {@code pages} of them; returns how many. */
    int release(int pages) {
        int freed = 0;
        for (int s = slots.nextSetBit(0); s >= 0 && freed < pages; s = slots.nextSetBit(s + 1)) {
            slots.clear(s);
            cache.host().release(s);
            freed++;
        }
        return freed;
    }

    /** Releases all of them; returns how many. */
    int releaseAll() {
        return cache.host == null ? 0 : release(Integer.MAX_VALUE);
    }

    /** Lets the one holding {@code key} go, so that a fresh write of the key can begin; false if none does. */
    boolean drop(StoreKey key) {
        if (cache.host == null) {
            return false;
        }
        int slot = cache.host().find(key);
        if (slot >= 0 && slots.get(slot)) {
            slots.clear(slot);
            cache.host().release(slot);
            return true;
        }
        return false;
    }

    /**
     * Adopts those that continue {@code m}'s match of {@code tokens}: the pages from the end of the match on whose keys
     * the host holds, up to the first it does not, become host-only nodes, served like any host hit. Returns how many.
     */
    int adopt(int[] tokens, MatchResult m) {
        int page = cache.config.pageSizeTokens();
        int from = m.matchedPages();
        int total = tokens.length / page;
        if (cache.host == null || from >= total) {
            return 0;
        }
        boolean agreeing = cache.agreement.enabled();
        if (agreeing && anyRankHasThem == null) { // every rank's first request with a tail asks, once
            anyRankHasThem =
                    cache.agreement.allReduceMin(RankAgreement.Site.LEFTOVERS_ANY, slots.isEmpty() ? 1 : 0)[0] == 0;
        }
        if (agreeing ? !Boolean.TRUE.equals(anyRankHasThem) : slots.isEmpty()) {
            return 0;
        }
        TreeNode anchor = m.lastNode();
        PageHasher hasher = new PageHasher(page);
        int[] found = new int[total - from];
        int count = 0;
        PageHashes hashes = PageHashes.empty();
        // hashed a batch at a time: a request whose first missing page is not on the host pays for one batch only
        for (int at = from; at < total && count == at - from; at += HASH_BATCH_PAGES) {
            int to = Math.min(total, at + HASH_BATCH_PAGES);
            PageHash prior = at == from ? anchor.priorHash() : hashes.last();
            PageHashes batch = prior == null
                    ? hasher.hashPages(tokens, at * page, to * page)
                    : hasher.hashPages(tokens, at * page, to * page, prior);
            hashes = hashes.concat(batch);
            for (int i = 0; i < batch.size(); i++) {
                int slot = cache.host().find(cache.namespace.key(batch.get(i)));
                if (slot < 0 || !slots.get(slot)) {
                    break;
                }
                found[count++] = slot;
            }
        }
        if (agreeing) {
            count = cache.agreement.allReduceMin(RankAgreement.Site.LEFTOVERS_ADOPTED, count)[0]; // what all kept
        }
        if (count == 0) {
            return 0;
        }
        RadixTree.HostInsert inserted = cache.tree.insertHost(
                anchor, tokens, from * page, count, Arrays.copyOf(found, count), hashes.slice(0, count));
        BitSet unused = new BitSet();
        for (int slot : inserted.unusedSlots()) {
            unused.set(slot);
        }
        for (int i = 0; i < count; i++) {
            if (!unused.get(found[i])) {
                slots.clear(found[i]); // a node owns it now
            }
        }
        int adopted = count - inserted.unusedSlots().length;
        cache.metrics.hostAdoptedPages.add(adopted);
        for (TreeNode n : inserted.storedOnHost()) {
            cache.events.stored(n, Medium.CPU);
        }
        return adopted;
    }
}
