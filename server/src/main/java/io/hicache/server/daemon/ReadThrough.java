package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreSlot;
import io.hicache.core.usage.PageUsageIndex;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * Reads through the host tier to L3: pages are pinned where the slab has them, and fetched from L3 (in one batch)
 * where it has not, then promoted into the slab where there is room without waiting, or kept in a buffer of their own
 * where there is not (so that a read larger than the slab is still answered in full). The leading-hit count looks in
 * L3 the same way. Each read answers first whether it can finish without L3 ({@link #pinAllHere},
 * {@link #leadingHitsHere}: for the event loop, which must not block), then with L3 (a worker).
 *
 * <p>Who releases what: every page a read hands out is pinned once for the caller, who {@link PageIndex#unpin}s it
 * (a spilled page's buffer is freed then). Thread-safe.
 */
final class ReadThrough {
    private static final System.Logger LOG = System.getLogger(ReadThrough.class.getName());

    /**
     * Pages a read found, pinned for the caller (null where not delivered), and why each missing one is missing.
     *
     * @param pages   one per key asked, in order; a page of another length than asked is there as it is (the caller
     *                answers SIZE_MISMATCH)
     * @param missing per key, why a null page was not delivered: MISS, CORRUPT, SIZE_MISMATCH (as L3 found it),
     *                TIMED_OUT (the deadline passed before L3 answered: a deadline never turns a stored page into a
     *                miss) or FAILED; null when every missing page is a MISS
     */
    record Pinned(SlabPage[] pages, PageStatus @Nullable [] missing) {
        /** Why page {@code i}, which is null, was not delivered. */
        PageStatus why(int i) {
            return missing == null ? PageStatus.MISS : missing[i];
        }
    }

    /** Where a page fetched from L3 lands: a block of the slab, or a spill buffer. */
    private record Landing(
            int index,
            StoreKey key,
            long offset,
            int order,
            int length,
            @Nullable ByteBuf spill) {}

    private final ServerConfig config;
    private final SlabSpace space;
    private final PageIndex pages;
    private final Eviction eviction;
    private final StoreSlot l3;
    private final L3Clears clears;
    private final ServerEvents events;
    private final TierCounters counters;

    ReadThrough(
            ServerConfig config,
            SlabSpace space,
            PageIndex pages,
            Eviction eviction,
            StoreSlot l3,
            L3Clears clears,
            ServerEvents events,
            TierCounters counters) {
        this.config = config;
        this.space = space;
        this.pages = pages;
        this.eviction = eviction;
        this.l3 = l3;
        this.clears = clears;
        this.events = events;
        this.counters = counters;
    }

    /**
     * Pins every page of {@code keys} if that needs no L3 access: each is here, or there is no L3 (a page not here is
     * then a miss). Empty, with nothing pinned, if some page would have to be looked for in L3.
     */
    Optional<Pinned> pinAllHere(List<StoreKey> keys) {
        SlabPage[] out = new SlabPage[keys.size()];
        int found = 0;
        // Last page first, so that a chain's first pages are its most recently used and its suffix goes first.
        for (int i = keys.size() - 1; i >= 0; i--) {
            out[i] = pages.pin(keys.get(i));
            if (out[i] != null) {
                found++;
            } else if (l3.attached()) {
                for (int j = i + 1; j < keys.size(); j++) {
                    if (out[j] != null) {
                        pages.unpin(out[j]);
                    }
                }
                return Optional.empty();
            }
        }
        counters.hostHits.add(found);
        counters.misses.add(keys.size() - found);
        return Optional.of(new Pinned(out, null));
    }

    /**
     * Pins every page of {@code keys} that is here or in L3, fetching those from L3 in one batch, with the lengths the
     * client expects ({@code lengths}), waiting for L3 up to {@code deadline}.
     */
    Pinned pinAll(List<StoreKey> keys, int[] lengths, Deadline deadline) {
        SlabPage[] out = new SlabPage[keys.size()];
        PageStatus[] why = new PageStatus[keys.size()];
        List<Integer> absent = new ArrayList<>();
        PageStore store = l3.acquire();
        try {
            for (int i = keys.size() - 1; i >= 0; i--) { // last first, as in pinAllHere
                out[i] = pages.pin(keys.get(i));
                if (out[i] != null) {
                    counters.hostHits.increment();
                } else {
                    absent.add(i);
                    why[i] = store != null ? PageStatus.stoppedBy(deadline) : PageStatus.MISS;
                }
            }
            Collections.reverse(absent);
            if (!absent.isEmpty() && store != null && !deadline.isOver()) {
                promote(store, keys, lengths, absent, out, deadline, why);
                pages.useLastFirst(keys, null); // promotions were added first page first: last first again
            }
        } finally {
            if (store != null) {
                l3.release(store);
            }
        }
        for (int i : absent) {
            if (out[i] == null && why[i] == PageStatus.MISS) {
                counters.misses.increment();
            }
        }
        return new Pinned(out, why);
    }

    /**
     * Fetches the {@code absent} pages from L3 in one batch into {@code out}, pinned: into fresh blocks where the slab
     * has room without waiting (those found become clean pages of the index), into spill buffers where it has not
     * (pages outside the index, freed when unpinned). {@code why} gets the status of each page not found.
     */
    private void promote(
            PageStore store,
            List<StoreKey> keys,
            int[] lengths,
            List<Integer> absent,
            SlabPage[] out,
            Deadline deadline,
            PageStatus[] why) {
        List<StoreKey> ask = new ArrayList<>();
        List<MemorySegment> targets = new ArrayList<>();
        List<Landing> landings = new ArrayList<>();
        for (int i : absent) {
            if (lengths[i] <= 0 || lengths[i] > config.maxPageBytes()) {
                why[i] = PageStatus.MISS; // no page of that length can be stored here
                continue;
            }
            StoreKey key = keys.get(i);
            int order = space.orderFor(lengths[i]);
            // A page a clear is removing from L3 is served from a buffer, not promoted: the clear must not leave it
            // here. Others evict for their block, but do not wait: the page can be served from a buffer at once.
            long offset = clears.holds(key) ? -1 : eviction.allocate(order, Deadline.expired());
            Landing landing;
            if (offset >= 0) {
                landing = new Landing(i, key, offset, order, lengths[i], null);
                targets.add(space.bytes(offset, lengths[i]));
            } else {
                ByteBuf spill = ByteBufAllocator.DEFAULT.directBuffer(lengths[i], lengths[i]);
                spill.writerIndex(lengths[i]);
                landing = new Landing(i, key, -1, -1, lengths[i], spill);
                targets.add(MemorySegment.ofBuffer(spill.nioBuffer(0, lengths[i])));
            }
            ask.add(key);
            landings.add(landing);
        }
        if (ask.isEmpty()) {
            return;
        }
        BatchResult r = null;
        try {
            r = store.get(PageBatch.of(ask, targets), deadline).get(Waits.l3Millis(deadline), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            LOG.log(Level.DEBUG, () -> "L3 get failed: " + e);
        }
        for (int j = 0; j < ask.size(); j++) {
            Landing at = landings.get(j);
            boolean found = r != null && r.status(j) == PageStatus.OK;
            if (found) {
                counters.storeHits.increment();
            } else {
                why[at.index()] = r != null
                        ? r.status(j)
                        : deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED;
            }
            if (at.spill() == null) {
                if (found) {
                    out[at.index()] = admit(at);
                    if (out[at.index()] == null) {
                        // a racing write put the page here first and a racing delete removed it: it is gone now,
                        // and the answer must say so, not the deadline the status was first set to
                        why[at.index()] = PageStatus.MISS;
                    }
                } else {
                    space.freeBlock(at.offset(), at.order());
                }
            } else if (found) {
                out[at.index()] = SlabPage.spilled(at.key(), at.spill(), at.length(), PageChecksum.of(targets.get(j)));
            } else {
                at.spill().release();
            }
        }
    }

    /** A page fetched from L3 into a block becomes a clean page of the index, pinned for the caller; or null. */
    private @Nullable SlabPage admit(Landing at) {
        StoreKey key = at.key();
        SlabPage p = new SlabPage(
                key, at.offset(), at.order(), at.length(), PageChecksum.of(space.bytes(at.offset(), at.length())));
        p.pins.incrementAndGet();
        space.charge(key.namespace(), space.blockBytes(at.order())); // before it enters the usage index
        if (pages.add(p, PageUsageIndex.PINNED | PageUsageIndex.FLAGGED) != p) {
            space.free(key.namespace(), at.offset(), at.order());
            return pages.pin(key);
        }
        if (clears.holds(key)) {
            // A clear of its namespace was asked while it was read: its removal of the slab's pages may have passed
            // already. It leaves the slab again; the caller's pin keeps its bytes until it is sent.
            pages.leave(p);
            return p;
        }
        events.storedHere(key);
        return p;
    }

    /** Leading keys here, if that needs no L3: every key is here, or there is no L3; else empty. */
    OptionalInt leadingHitsHere(List<StoreKey> keys) {
        int n = slabRun(keys).slab();
        return n < keys.size() && l3.attached() ? OptionalInt.empty() : OptionalInt.of(n);
    }

    /**
     * Leading keys here or in L3: a page counts if either tier has it, as a GET would serve it.
     *
     * @throws NotDoneInTime when L3 did not answer before the deadline: a shorter count would say pages are gone
     * @throws IllegalStateException when L3 failed to answer, for the same reason
     */
    int leadingHits(List<StoreKey> keys, Deadline deadline) {
        PageStore store = l3.acquire();
        try {
            return leadingHits(store, keys, deadline);
        } finally {
            if (store != null) {
                l3.release(store);
            }
        }
    }

    private int leadingHits(@Nullable PageStore store, List<StoreKey> keys, Deadline deadline) {
        // The pages not here are asked of L3 in one query, and the count ends at the first of them L3 lacks. (A chain's
        // first pages may be only in L3, after a FLUSH or an eviction, and its later ones only here, not yet written
        // behind.)
        List<Integer> absent = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            if (!pages.contains(keys.get(i))) {
                absent.add(i);
            }
        }
        if (absent.isEmpty() || store == null) {
            return absent.isEmpty() ? keys.size() : absent.get(0);
        }
        int here = absent.get(0);
        if (deadline.isOver()) {
            throw new NotDoneInTime(
                    "leading hits: " + here + " pages here, and the deadline passed before L3 was asked");
        }
        List<StoreKey> ask = new ArrayList<>(absent.size());
        for (int i : absent) {
            ask.add(keys.get(i));
        }
        int inL3;
        try {
            inL3 = store.leadingHits(ask, deadline).get(Waits.l3Millis(deadline), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } catch (ExecutionException | TimeoutException e) {
            if (deadline.isOver()) {
                throw new NotDoneInTime(
                        "leading hits: " + here + " pages here, and L3 did not answer before the deadline");
            }
            throw new IllegalStateException("the L3 leading-hit query failed: " + e.getMessage(), e);
        }
        // A store answers 0 for work its deadline stopped, so a short count after the deadline proves nothing.
        if (inL3 < ask.size() && deadline.isOver()) {
            throw new NotDoneInTime("leading hits: " + here + " pages here, and L3 did not finish before the deadline");
        }
        return inL3 >= absent.size() ? keys.size() : absent.get(inL3);
    }

    /**
     * Per tier, the longest leading run of {@code keys} held: the slab's, L3's and either's (as {@link #leadingHits}).
     * A router's question: touches no page. L3 is asked at most twice (its own run, then the pages after it that the
     * slab lacks); where it does not answer in time, or fails, its run is 0 and {@code any} counts the slab alone, and
     * the state says so rather than failing the question.
     */
    PrefixRuns prefixHits(List<StoreKey> keys, Deadline deadline) {
        PrefixRuns here = slabRun(keys);
        int slab = here.slab();
        PageStore store = l3.acquire();
        if (store == null) {
            return here;
        }
        try {
            int inL3 = store.leadingHits(keys, deadline).get(Waits.l3Millis(deadline), TimeUnit.MILLISECONDS);
            if (inL3 < keys.size() && deadline.isOver()) {
                return new PrefixRuns(
                        slab, 0, slab, PrefixRuns.L3_LATE); // a short count after the deadline proves nothing
            }
            // Either tier's run goes on while the slab or L3's run holds a page; past L3's run L3 is not known to lack
            // a page, so the pages from there on that the slab lacks are asked of it again.
            int any = 0;
            while (any < keys.size() && (any < inL3 || pages.contains(keys.get(any)))) {
                any++;
            }
            if (any < keys.size() && any > inL3) {
                List<StoreKey> rest = new ArrayList<>();
                List<Integer> restAt = new ArrayList<>();
                for (int i = any; i < keys.size(); i++) {
                    if (!pages.contains(keys.get(i))) {
                        rest.add(keys.get(i));
                        restAt.add(i);
                    }
                }
                int more = store.leadingHits(rest, deadline).get(Waits.l3Millis(deadline), TimeUnit.MILLISECONDS);
                if (more < rest.size() && deadline.isOver()) { // a short count after the deadline proves nothing
                    return new PrefixRuns(slab, 0, slab, PrefixRuns.L3_LATE);
                }
                any = more >= rest.size() ? keys.size() : restAt.get(more);
            }
            return new PrefixRuns(slab, inL3, any, PrefixRuns.ANSWERED);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new PrefixRuns(slab, 0, slab, PrefixRuns.L3_FAILED);
        } catch (ExecutionException | TimeoutException e) {
            return new PrefixRuns(slab, 0, slab, deadline.isOver() ? PrefixRuns.L3_LATE : PrefixRuns.L3_FAILED);
        } finally {
            l3.release(store);
        }
    }

    /** {@link #prefixHits} without L3: for the event loop, which must not block; empty when L3 is attached. */
    Optional<PrefixRuns> prefixHitsHere(List<StoreKey> keys) {
        return l3.attached() ? Optional.empty() : Optional.of(slabRun(keys));
    }

    private PrefixRuns slabRun(List<StoreKey> keys) {
        int slab = 0;
        while (slab < keys.size() && pages.contains(keys.get(slab))) {
            slab++;
        }
        return new PrefixRuns(slab, 0, slab, PrefixRuns.NO_L3);
    }

    /**
     * A PREFIX_HITS answer: the leading runs of the slab, of L3 and of either tier, and what became of L3's part.
     *
     * @param l3State {@link #NO_L3}, {@link #ANSWERED}, {@link #L3_LATE} or {@link #L3_FAILED} (then {@code l3} is 0 and
     *                {@code any} counts the slab alone)
     */
    record PrefixRuns(int slab, int l3, int any, int l3State) {
        static final int NO_L3 = 0;
        static final int ANSWERED = 1;
        static final int L3_LATE = 2;
        static final int L3_FAILED = 3;
    }
}
