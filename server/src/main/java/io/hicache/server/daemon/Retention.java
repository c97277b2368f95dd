package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.function.LongSupplier;
import java.util.function.Predicate;

/**
 * Retention priorities of the slab's pages (RETAIN, docs/protocol.md §3): a page's priority (0-99) holds for its
 * retention after each use and then decays to 0; a demoted page goes before every other. Eviction takes pages in
 * passes: demoted ones, then those of effective priority 0, then each priority in use from the lowest up, each pass
 * least recently used first ({@link #firstPasses}, {@link #priorityPasses}). Until the first RETAIN, eviction makes one pass, as it always did.
 *
 * <p>A RETAIN names a chain from its first page and is applied last page first, so that the chain's prefix is used
 * more recently than its suffix and outlives it; the prefix's pages get the RETAIN's priority and a deadline no
 * earlier than the suffix's. Later hits renew each page they read on its own: a client that reads only a chain's
 * suffix (an engine reading past what its GPU holds) lets the prefix's priority lapse first, and should RETAIN the
 * whole chain again when it matters.
 *
 * <p>Thread-safe: the page fields it sets are volatile, and a page's priority and deadline may be read a moment apart
 * (eviction is a heuristic; the worst case is one page evicted in the pass next to its own).
 */
final class Retention {
    private final PageIndex pages;
    private final LongSupplier nanoClock;
    private volatile boolean inUse;
    private volatile boolean demotedAny;

    Retention(PageIndex pages, LongSupplier nanoClock) {
        this.pages = pages;
        this.nanoClock = nanoClock;
    }

    /** Whether any RETAIN came: before one, eviction needs no passes. */
    boolean inUse() {
        return inUse;
    }

    /** {@code p}'s priority now: 0 once its retention passed since its last use, or when demoted. */
    int effective(SlabPage p, long nowNanos) {
        return p.priority > 0 && nowNanos - p.retainUntilNanos < 0 ? p.priority : 0;
    }

    /** A use of {@code p} (a GET, LEASE or PUT of it): its retention starts again, and a demotion ends. */
    void used(SlabPage p) {
        if (p.retentionNanos > 0) {
            long now = nanoClock.getAsLong();
            if (now - p.retainUntilNanos >= 0) { // lapsed: the priority decayed to 0 and stays there
                p.priority = 0;
                p.retentionNanos = 0;
            } else {
                p.retainUntilNanos = now + p.retentionNanos;
            }
        }
        p.demoted = false;
    }

    /**
     * Applies a RETAIN to the pages of {@code chain} the slab holds, last first; OK for each, MISS for one it lacks.
     */
    PageStatus[] retain(List<StoreKey> chain, int priority, long retentionMillis, boolean demote) {
        inUse = true;
        long now = nanoClock.getAsLong();
        long retentionNanos = retentionMillis * 1_000_000L;
        PageStatus[] out = new PageStatus[chain.size()];
        for (int i = chain.size() - 1; i >= 0; i--) {
            SlabPage p = pages.touch(chain.get(i));
            if (p == null) {
                out[i] = PageStatus.MISS;
                continue;
            }
            if (demote) {
                demotedAny = true;
                p.priority = 0;
                p.retentionNanos = 0;
                p.retainUntilNanos = now;
                p.demoted = true;
            } else {
                // A page keeps the higher of its own effective priority and this one, and the later deadline.
                int before = effective(p, now);
                p.priority = Math.max(before, priority);
                p.retentionNanos = Math.max(before > 0 ? p.retentionNanos : 0, retentionNanos);
                long until = now + retentionNanos;
                if (before == 0 || until - p.retainUntilNanos > 0) {
                    p.retainUntilNanos = until;
                }
                p.demoted = false;
            }
            out[i] = PageStatus.OK;
        }
        return out;
    }

    /**
     * The first passes of one eviction, each a filter of the keys it may take: demoted pages (once any was), then
     * pages of effective priority 0.
     */
    List<Predicate<StoreKey>> firstPasses() {
        long now = nanoClock.getAsLong();
        List<Predicate<StoreKey>> passes = new ArrayList<>(2);
        if (demotedAny) {
            passes.add(key -> {
                SlabPage p = pages.peek(key);
                return p != null && p.demoted;
            });
        }
        passes.add(key -> {
            SlabPage p = pages.peek(key);
            return p != null && effective(p, now) == 0;
        });
        return passes;
    }

    /**
     * The passes after {@link #firstPasses}, when they did not make the room: for each priority some page has now, from
     * the lowest, pages up to it. Walks every page once to find the priorities.
     */
    List<Predicate<StoreKey>> priorityPasses() {
        long now = nanoClock.getAsLong();
        BitSet levels = new BitSet();
        for (SlabPage p : pages.snapshot()) {
            int level = effective(p, now);
            if (level > 0) {
                levels.set(level);
            }
        }
        List<Predicate<StoreKey>> passes = new ArrayList<>();
        for (int level = levels.nextSetBit(0); level >= 0; level = levels.nextSetBit(level + 1)) {
            int upTo = level;
            passes.add(key -> {
                SlabPage p = pages.peek(key);
                return p != null && effective(p, now) <= upTo;
            });
        }
        return passes;
    }
}
