package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.usage.PageUsageIndex.Candidates;
import io.hicache.core.usage.PageUsageIndex.Claimed;
import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiFunction;
import org.jspecify.annotations.Nullable;

/**
 * The host tier's pages: a map from store key to {@link SlabPage}, and a {@link PageUsageIndex} of the same pages
 * (their order of use, by namespace too; reader pins; flagged once L3 has them), so that eviction walks from the
 * least recently used page without sorting. A page enters and leaves the map and the usage index together, inside the
 * map's lock for its key, so the two always agree.
 *
 * <p>Pages are immutable while here. A page leaves by delete or clear ({@link #remove}), flush ({@link #drop}),
 * eviction ({@link #evict}) or a clear racing its promotion ({@link #leave(SlabPage)}); its memory goes back to the
 * {@link SlabSpace} when it has left and its last user let go ({@link #release}), so a page being sent or leased
 * keeps its bytes after it is deleted.
 *
 * <p>Thread-safe.
 */
final class PageIndex {
    private final SlabSpace space;
    private final ConcurrentHashMap<StoreKey, SlabPage> pages = new ConcurrentHashMap<>();
    private final PageUsageIndex<StoreKey> usage = PageUsageIndex.<StoreKey>builder(PageUsageIndex.Order.RECENCY)
            .namespaces(key -> key.namespace().id())
            .build();

    /** Told of every use of a page, once retention is in use; set once by the slab cache. */
    private volatile @Nullable Retention retention;

    PageIndex(SlabSpace space) {
        this.space = space;
    }

    void retention(Retention retention) {
        this.retention = retention;
    }

    /** Pages here now. */
    int size() {
        return pages.size();
    }

    boolean contains(StoreKey key) {
        return pages.containsKey(key);
    }

    /** The keys here, a live view (for a clear, which removes them one by one). */
    Set<StoreKey> keys() {
        return pages.keySet();
    }

    /** The pages here now, a copy. */
    List<SlabPage> snapshot() {
        return new ArrayList<>(pages.values());
    }

    /**
     * Puts {@code p} in the map and the usage index, with {@code marks} ({@link PageUsageIndex#PINNED},
     * {@link PageUsageIndex#FLAGGED}), unless its key is here; returns the page that is here now ({@code p} if added).
     */
    SlabPage add(SlabPage p, int marks) {
        return pages.computeIfAbsent(p.key, key -> {
            p.usage = usage.insert(key, space.blockBytes(p.order), marks);
            return p;
        });
    }

    /* ---------------------------------------------------------------- users */

    /** The page of {@code key}, pinned and used (the caller {@link #unpin}s it), or null; a page being evicted is gone. */
    @Nullable
    SlabPage pin(StoreKey key) {
        SlabPage p = pages.get(key);
        if (p == null) {
            return null;
        }
        retain(p);
        if (p.removed || !usage.pinEntry(p.usage)) {
            release(p);
            return null;
        }
        usage.touchEntry(p.usage);
        Retention r = retention;
        if (r != null && r.inUse()) {
            r.used(p); // a hit: its retention starts again, and a demotion ends
        }
        return p;
    }

    /** The page of {@code key}, neither pinned nor used, or null: for eviction's filters, which must not touch. */
    @Nullable
    SlabPage peek(StoreKey key) {
        return pages.get(key);
    }

    /** A use of {@code key}'s page without pinning it (a RETAIN): it becomes the most recently used. Null if absent. */
    @Nullable
    SlabPage touch(StoreKey key) {
        SlabPage p = pages.get(key);
        if (p == null || p.removed) {
            return null;
        }
        usage.touchEntry(p.usage);
        return p;
    }

    /**
     * Makes the pages of {@code keys} that are here (status OK or EXISTS, or {@code statuses} null) the most recently
     * used, last page first: a batch is a chain's pages, first page first, so its first pages end up the most recent
     * and eviction takes the chain's suffix before its prefix. Nothing to do for one page.
     */
    void useLastFirst(List<StoreKey> keys, PageStatus @Nullable [] statuses) {
        if (keys.size() < 2) {
            return;
        }
        for (int i = keys.size() - 1; i >= 0; i--) {
            if (statuses == null || statuses[i] == PageStatus.OK || statuses[i] == PageStatus.EXISTS) {
                SlabPage p = pages.get(keys.get(i));
                if (p != null && !p.removed) {
                    usage.touchEntry(p.usage);
                }
            }
        }
    }

    /** Lets go of a page {@link #pin} (or a read that fetched it from L3) handed out. */
    void unpin(SlabPage p) {
        usage.unpin(p.usage); // false for a page outside the index by now: nothing to undo there
        release(p);
    }

    /** Keeps {@code p}'s memory while the caller uses it, without pinning it against eviction: the write-behind's. */
    void retain(SlabPage p) {
        p.pins.incrementAndGet();
    }

    /** Undoes {@link #retain}; frees the memory of a page removed meanwhile once its last user lets go. */
    void release(SlabPage p) {
        if (p.pins.decrementAndGet() == 0 && p.removed) {
            freeIfUnused(p);
        }
    }

    private void freeIfUnused(SlabPage p) {
        if (p.pins.get() == 0 && p.freed.compareAndSet(false, true)) {
            if (!p.inSlab()) {
                Checks.checkNotNull(p.spill, "a spilled page's buffer").release();
                return;
            }
            space.free(p.key.namespace(), p.offset, p.order);
        }
    }

    /* ---------------------------------------------------------------- L3 */

    /** The write-behind put {@code p} in L3: from now on it may be evicted. */
    void writtenBehind(SlabPage p) {
        p.dirty = false;
        usage.setFlagged(p.usage, true);
    }

    /**
     * The write-behind gave up on {@code p} (or dropped it: no store): it may be evicted, and is then gone, so that
     * pages L3 will not take cannot fill the slab and block every put.
     */
    void givenUp(SlabPage p) {
        p.dirty = false;
        usage.setFlagged(p.usage, true);
    }

    /* ---------------------------------------------------------------- leaving */

    /** Removes {@code key}'s page (delete, clear): true if there was one. It stops being written behind. */
    boolean remove(StoreKey key) {
        SlabPage p = takeOut(key, null, false);
        if (p == null) {
            return false;
        }
        p.dirty = false;
        freeIfUnused(p);
        return true;
    }

    /**
     * Removes {@code p}, found damaged (its bytes fail its CRC-32C), if it is still the page of its key: it is not
     * written behind, and its memory goes when its last user lets go. True if it was taken out here.
     */
    boolean discardCorrupt(SlabPage p) {
        if (takeOut(p.key, p, false) == null) {
            return false;
        }
        p.dirty = false;
        freeIfUnused(p);
        return true;
    }

    /** Removes {@code p} (flush) if it is still the page of its key, L3 has it (or there is none), and nobody uses it. */
    boolean drop(SlabPage p) {
        if (takeOut(p.key, p, true) == null) {
            return false;
        }
        freeIfUnused(p);
        return true;
    }

    /** Evicts a claimed candidate unless it is no longer the page claimed, L3 lacks it, or it is in use. */
    boolean evict(Claimed<StoreKey> candidate) {
        SlabPage p = pages.get(candidate.key());
        if (p == null || p.usage != candidate.entry() || takeOut(candidate.key(), p, true) == null) {
            return false;
        }
        freeIfUnused(p);
        return true;
    }

    /**
     * Takes {@code p} out if it is still the page of its key, leaving its memory to its users (a promotion that a
     * clear overtook: the caller's pin keeps the bytes until they are sent).
     */
    void leave(SlabPage p) {
        takeOut(p.key, p, false);
    }

    /**
     * Takes {@code key}'s page out of the map and the usage index, in the map's lock: only if it is {@code expected}
     * (null: whichever), and, with {@code onlyIfIdle}, only if L3 has it and nobody uses it. Returns the page taken out,
     * or null.
     */
    private @Nullable SlabPage takeOut(StoreKey key, @Nullable SlabPage expected, boolean onlyIfIdle) {
        TakeOut t = new TakeOut(expected, onlyIfIdle);
        pages.computeIfPresent(key, t);
        return t.taken;
    }

    /** One take-out's remapping, run in the map's lock for the key: it remembers the page it took out. */
    private final class TakeOut implements BiFunction<StoreKey, SlabPage, SlabPage> {
        private final @Nullable SlabPage expected;
        private final boolean onlyIfIdle;
        private @Nullable SlabPage taken;

        TakeOut(@Nullable SlabPage expected, boolean onlyIfIdle) {
            this.expected = expected;
            this.onlyIfIdle = onlyIfIdle;
        }

        @Override
        public @Nullable SlabPage apply(StoreKey key, SlabPage now) {
            if (expected != null && now != expected || onlyIfIdle && (now.dirty || now.pins.get() != 0)) {
                return now;
            }
            now.removed = true;
            usage.removeEntry(now.usage);
            taken = now;
            return null;
        }
    }

    /* ---------------------------------------------------------------- eviction's view */

    /** Claims the least recently used pages {@code which} describes, about {@code bytes} of them (see PageUsageIndex). */
    List<Claimed<StoreKey>> claimOldest(long bytes, Candidates<StoreKey> which) {
        return usage.claimOldest(bytes, which);
    }

    /** Gives back a claim that did not end in an eviction. */
    void unclaim(long entry) {
        usage.unclaim(entry);
    }
}
