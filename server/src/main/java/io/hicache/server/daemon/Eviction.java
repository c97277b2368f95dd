package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.usage.PageUsageIndex.Candidates;
import io.hicache.core.usage.PageUsageIndex.Claimed;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

/**
 * Makes room in the slab by evicting pages: the least recently used ones that L3 already has and nobody uses (all
 * unused ones, without L3, whose write-behind gives every page up at once), of the whole slab or of one namespace at
 * its quota. When only pages not yet in L3 are left, it waits for the write-behind to make some evictable, up to the
 * deadline it is given. An eviction of the whole slab goes on to a low-water mark of free bytes
 * ({@link #freeTarget}), so that it runs once per many puts.
 *
 * <p>Thread-safe: one eviction at a time (others wait for it, then find the room it made).
 */
final class Eviction {
    /**
     * Eviction goes on until this fraction of the slab is free (1/64), so that it runs once per many puts, but no
     * further than {@link #FREE_TARGET_MAX_BYTES}.
     */
    private static final long FREE_TARGET_FRACTION = 64;
    /**
     * The most a put's eviction frees beyond what the put needs. Puts that find no room wait for the evicting one, so
     * its batch is a stall for every put in flight: 1/64 of an 8 GiB slab is 128 MiB (8,192 pages of 16 KiB, tens of
     * milliseconds). Capped, the stall no longer grows with the slab (issue 22, part 7: the evicting put's p99 fell
     * from 4.6 ms to 2.9-3.8 ms, its p99.9 from 13-24 ms to 6-8 ms).
     */
    static final long FREE_TARGET_MAX_BYTES = 4L << 20;

    private final SlabSpace space;
    private final PageIndex pages;
    private final WriteBehind writeBehind;
    private final ServerEvents events;
    private final LongAdder evictedPages;
    private final Retention retention;
    private final Object lock = new Object();

    Eviction(
            SlabSpace space,
            PageIndex pages,
            WriteBehind writeBehind,
            ServerEvents events,
            LongAdder evictedPages,
            Retention retention) {
        this.space = space;
        this.retention = retention;
        this.pages = pages;
        this.writeBehind = writeBehind;
        this.events = events;
        this.evictedPages = evictedPages;
    }

    /** The free bytes eviction for the whole slab goes on to: 1/64 of it, at most {@link #FREE_TARGET_MAX_BYTES}. */
    static long freeTarget(long slabBytes) {
        return Math.min(slabBytes / FREE_TARGET_FRACTION, FREE_TARGET_MAX_BYTES);
    }

    /**
     * A free block of {@code order}, evicting from the whole slab, and waiting for the write-behind, until
     * {@code deadline}; -1 if there is none by then. An expired deadline evicts what it can at once and does not wait.
     */
    long allocate(int order, Deadline deadline) {
        long offset = space.allocate(order);
        if (offset >= 0) {
            return offset;
        }
        BlockWanted wanted = new BlockWanted(order);
        Candidates<StoreKey> clean = Candidates.<StoreKey>any().onlyFlagged();
        return evictUntil(clean, false, space.blockBytes(order), wanted, deadline) ? wanted.offset : -1;
    }

    /**
     * Evicts pages of {@code ns}, which holds {@code overBytes} over its quota, until it is within it; false if it
     * cannot be by {@code deadline}.
     */
    boolean fitQuota(Namespace ns, long overBytes, Deadline deadline) {
        long quota = space.quota();
        Candidates<StoreKey> clean = Candidates.<StoreKey>any().onlyFlagged().inNamespace(ns.id());
        return evictUntil(clean, true, overBytes, () -> space.namespaceBytes(ns) <= quota, deadline);
    }

    /**
     * Evicts pages of tenant {@code tenant}'s namespaces until they hold at most {@code quota} bytes of the slab; false
     * if they cannot by {@code deadline}.
     */
    boolean fitTenantQuota(String tenant, long quota, Deadline deadline) {
        Candidates<StoreKey> clean = Candidates.<StoreKey>any()
                .onlyFlagged()
                .matching(key -> key.namespace().tenant().equals(tenant));
        long over = space.tenantBytes(tenant) - quota;
        return evictUntil(clean, true, Math.max(1, over), () -> space.tenantBytes(tenant) <= quota, deadline);
    }

    /**
     * Evicts {@code which} pages, oldest first, until {@code done} holds, and then on to the low-water mark of free slab
     * unless {@code oneNamespace}; when only pages not yet in L3 are left, waits for the write-behind. False if
     * {@code done} cannot be had by the deadline. {@code wantedBytes} is a first guess of what {@code done} needs, to
     * size the batches claimed.
     */
    private boolean evictUntil(
            Candidates<StoreKey> which,
            boolean oneNamespace,
            long wantedBytes,
            BooleanSupplier done,
            Deadline deadline) {
        for (int round = 0; ; round++) {
            boolean met;
            // Pages of a higher priority go only after one wait for the write-behind: pages of a lower one that are not
            // in L3 yet become evictable by then, and go first (as long as the deadline allows the wait).
            boolean higher = round > 0 || writeBehind.pendingPages() == 0 || deadline.isOver();
            synchronized (lock) {
                met = done.getAsBoolean();
                if (!met) {
                    met = evictByRetention(oneNamespace, wantedBytes, which, done, higher);
                }
            }
            if (met || done.getAsBoolean()) {
                return true;
            }
            if (deadline.isOver() || writeBehind.pendingPages() == 0) {
                return false; // what is left is in use: waiting would not help
            }
            writeBehind.awaitProgress(Waits.pollMillis(deadline));
        }
    }

    /**
     * {@link #evictBatches} in one pass, or, once retention priorities are in use, in {@link Retention#firstPasses} and
     * {@link Retention#priorityPasses}: the lowest effective priority first, each least recently used first; a later
     * pass runs only while {@code done} does not hold, so that the low-water mark alone never evicts a page of a higher
     * priority, and the priority passes only when {@code mayTakeHigher} (see {@link #evictUntil}).
     */
    private boolean evictByRetention(
            boolean oneNamespace,
            long wantedBytes,
            Candidates<StoreKey> which,
            BooleanSupplier done,
            boolean mayTakeHigher) {
        if (!retention.inUse()) {
            return evictBatches(oneNamespace, wantedBytes, which, done);
        }
        for (Predicate<StoreKey> pass : retention.firstPasses()) {
            if (evictBatches(oneNamespace, wantedBytes, both(which, pass), done)) {
                return true;
            }
        }
        if (!mayTakeHigher) {
            return false;
        }
        for (Predicate<StoreKey> pass : retention.priorityPasses()) {
            if (evictBatches(oneNamespace, wantedBytes, both(which, pass), done)) {
                return true;
            }
        }
        return false;
    }

    /** {@code which}, narrowed to the keys {@code pass} accepts too. */
    private static Candidates<StoreKey> both(Candidates<StoreKey> which, Predicate<StoreKey> pass) {
        Predicate<? super StoreKey> first = which.filter();
        return which.matching(first == null ? pass : key -> first.test(key) && pass.test(key));
    }

    /**
     * Claims batches of candidates oldest first and evicts them until {@code done} holds and, for the whole slab, the
     * free target is reached, or no candidate is left; returns whether {@code done} held. Candidates that could not be
     * evicted (a reader came) stay claimed until the end, so that the next batch moves on, then are given back.
     */
    private boolean evictBatches(
            boolean oneNamespace, long wantedBytes, Candidates<StoreKey> which, BooleanSupplier done) {
        long freeTarget = freeTarget(space.slabBytes());
        boolean met = false;
        boolean finished = false;
        List<Long> kept = new ArrayList<>();
        List<StoreKey> evicted = new ArrayList<>();
        while (!finished) {
            long batchBytes = Math.max(wantedBytes, oneNamespace ? 0 : freeTarget - space.freeBytes());
            List<Claimed<StoreKey>> batch = pages.claimOldest(Math.max(1, batchBytes), which);
            if (batch.isEmpty()) {
                break;
            }
            for (Claimed<StoreKey> candidate : batch) {
                if (finished || !pages.evict(candidate)) {
                    kept.add(candidate.entry());
                    continue;
                }
                evictedPages.increment();
                evicted.add(candidate.key());
                if ((met || (met = done.getAsBoolean())) && (oneNamespace || space.freeBytes() >= freeTarget)) {
                    finished = true;
                }
            }
        }
        for (long entry : kept) {
            pages.unclaim(entry);
        }
        events.removedHere(evicted);
        return met;
    }

    /** The goal of an eviction for a block: met once a block of its order is taken (once: the block is its). */
    private final class BlockWanted implements BooleanSupplier {
        private final int order;
        private long offset = -1;

        BlockWanted(int order) {
            this.order = order;
        }

        @Override
        public boolean getAsBoolean() {
            if (offset < 0) {
                offset = space.allocate(order);
            }
            return offset >= 0;
        }
    }
}
