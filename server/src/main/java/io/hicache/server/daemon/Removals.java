package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreSlot;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * DELETE and CLEAR against the write-behind: pages are removed from the slab first (so the write-behind skips them),
 * then from L3 once the write-behind's batch in flight has finished (a batch already writing a removed page deletes it
 * from L3 again), so that a racing write cannot bring a removed page back. A delete waits for L3 up to its deadline; a
 * clear's L3 part runs in the background ({@link L3Clears}), holding back from L3 the pages it covers until it ends.
 *
 * <p>Thread-safe.
 */
final class Removals {
    private static final System.Logger LOG = System.getLogger(Removals.class.getName());

    /**
     * What a clear has done: the slab's pages it removed, and its L3 part ({@code inL3}: completes when L3 is clear,
     * or fails; null when there is no L3).
     */
    record Clearing(int removedHere, @Nullable CompletableFuture<Void> inL3, L3Clears.@Nullable Job job) {
        /** Where the L3 part stands, for a message. */
        String describeL3() {
            return job == null ? "no L3" : job.describe();
        }
    }

    private final PageIndex pages;
    private final StoreSlot l3;
    private final WriteBehind writeBehind;
    private final L3Clears clears;
    private final ServerEvents events;

    Removals(PageIndex pages, StoreSlot l3, WriteBehind writeBehind, L3Clears clears, ServerEvents events) {
        this.pages = pages;
        this.l3 = l3;
        this.writeBehind = writeBehind;
        this.clears = clears;
        this.events = events;
    }

    /**
     * Removes the pages here and in L3. OK for a page removed from a tier that had it and known to be in no other;
     * MISS for one in no tier; otherwise L3's status for it (TIMED_OUT when the deadline passed before L3 removed it:
     * the page may still be in L3, never "OK and back later").
     */
    PageStatus[] delete(List<StoreKey> keys, Deadline deadline) {
        PageStatus[] out = new PageStatus[keys.size()];
        List<StoreKey> removedHere = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            out[i] = pages.remove(keys.get(i)) ? PageStatus.OK : PageStatus.MISS;
            if (out[i] == PageStatus.OK) {
                removedHere.add(keys.get(i));
            }
        }
        events.removedHere(removedHere);
        PageStore store = l3.acquire();
        if (store == null) {
            return out;
        }
        BatchResult r = null;
        try {
            writeBehind.awaitBatchInFlight(deadline);
            r = store.delete(keys, deadline).get(Waits.l3Millis(deadline), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            LOG.log(Level.DEBUG, () -> "L3 delete failed: " + e);
        } finally {
            l3.release(store);
        }
        List<StoreKey> removedFromL3 = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            PageStatus inL3 =
                    r != null ? r.status(i) : deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED;
            if (inL3 == PageStatus.OK) {
                out[i] = PageStatus.OK;
                removedFromL3.add(keys.get(i));
            } else if (inL3 != PageStatus.MISS) {
                out[i] = inL3; // not known to be gone from L3
            }
        }
        events.removedFromL3(removedFromL3);
        return out;
    }

    /**
     * Clears namespace {@code ns}, or every namespace ({@link #clearAll}): its L3 part is queued first (from then on its
     * pages put are not written behind, nor pages read from L3 promoted, until it ends), then its pages in the slab are
     * removed, at once. The L3 part goes on in the background; the caller waits for it as long as it likes.
     */
    Clearing clear(Namespace ns) {
        return clearing(ns);
    }

    /** As {@link #clear}, of every namespace. */
    Clearing clearAll() {
        return clearing(null);
    }

    /** {@code ns} null: every namespace, as {@link L3Clears} takes it. */
    private Clearing clearing(@Nullable Namespace ns) {
        PageStore store = l3.acquire();
        L3Clears.Job job = store == null ? null : clears.submit(ns, store); // takes over the acquisition
        int removed = 0;
        for (StoreKey k : pages.keys()) {
            if ((ns == null || k.namespace().equals(ns)) && pages.remove(k)) {
                removed++;
            }
        }
        if (job == null) {
            events.cleared(); // with an L3, once its clear has ended
            return new Clearing(removed, null, null);
        }
        return new Clearing(removed, job.done, job);
    }
}
