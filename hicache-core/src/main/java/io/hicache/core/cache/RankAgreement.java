package io.hicache.core.cache;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.rank.RankGroup;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Keeps the tensor-parallel ranks' trees identical: what finishes in the background (copies between device and host,
 * uploads that protect host pages, host slots a prefetch did not use) is not applied when it finishes but
 * queued, in the order it started, and applied at the engine's calls, as far as every rank has got ({@link #settle}:
 * one all-reduce MIN of each lane's finished prefix and of the copies' outcomes, SGLang's {@code writing_check});
 * every decision that depends on timing or on one rank's view goes through {@link #allReduceMin} at the same call on
 * every rank. Without a group (one rank) it does nothing: completions apply as they happen.
 *
 * <p>Every collective carries the point of the code that calls it ({@link Site}), reduced with MIN and MAX, so that
 * ranks that fell out of step (one rank settles where another claims a backup's pages) fail at once with
 * {@code RANK_GROUP_FAILED} on every rank rather than combining unrelated values.
 *
 * <p>Not thread-safe: every method but {@link Entry#done} and {@link #queryHits} (the prefetch query thread's, on its
 * own group) is called with the cache's lock held. Holds no resources; the groups are the embedder's.
 */
final class RankAgreement {
    private static final System.Logger LOG = System.getLogger(RankAgreement.class.getName());

    /** The points of the code that call a collective: every rank must call the same ones in the same order. */
    enum Site {
        SETTLE,
        BACKUP_CLAIM,
        PREFETCH_START,
        PREFETCH_END,
        LEFTOVERS_ANY,
        LEFTOVERS_ADOPTED,
        QUERY_HITS
    }

    /** Copies whose outcome one settle carries at most: more finished ones wait for the next. */
    static final int COPY_OUTCOMES = 32;

    /** The queues of what finishes in the background, each applied in the order it started. */
    enum Lane {
        /** Device-host copies (backups, loads): their outcome is agreed too, a copy failed on one rank fails on all. */
        COPIES,
        /** Uploads to the page store: each protects its node's host pages until it is applied. */
        UPLOADS,
        /** Host slots a prefetch did not use (a batch may still be writing some): freed once applied. */
        RELEASES
    }

    /** One thing finishing in the background; {@link #done} may be called from any thread, once. */
    static final class Entry {
        private static final int RUNNING = 0;
        private static final int OK = 1;
        private static final int FAILED = 2;

        private final Consumer<Boolean> apply;
        /** Host slots it holds until applied (a release), for the consistency check. */
        final int hostSlots;

        private volatile int state = RUNNING;

        private Entry(Consumer<Boolean> apply, int hostSlots) {
            this.apply = apply;
            this.hostSlots = hostSlots;
        }

        /** Records that it finished on this rank, well or not. */
        void done(boolean ok) {
            state = ok ? OK : FAILED;
        }

        boolean isDone() {
            return state != RUNNING;
        }
    }

    private final @Nullable RankGroup group;
    /** A second group of the same ranks for the prefetch query thread (SGLang's gloo group), or null. */
    private final @Nullable RankGroup queryGroup;

    private final Duration timeout;
    private final List<ArrayDeque<Entry>> lanes = new ArrayList<>();
    /** Closing: settle applies what finished here, without asking the others (who may be gone). */
    private volatile boolean local;
    /** Copies the last settle applied (the same on every rank). */
    private int copiesApplied;

    RankAgreement(@Nullable RankGroup group, @Nullable RankGroup queryGroup, Duration timeout) {
        this.group = group;
        this.queryGroup = queryGroup;
        this.timeout = timeout;
        for (int i = 0; i < Lane.values().length; i++) {
            lanes.add(new ArrayDeque<>());
        }
    }

    /** True when the cache is one rank of several whose trees must agree. */
    boolean enabled() {
        return group != null;
    }

    /** From now on (the cache is closing), settles apply what finished here and reductions return this rank's values. */
    void goLocal() {
        local = true;
    }

    /** Queues what applies {@code apply(ok)} once it is done on every rank; in order within its lane. */
    Entry add(Lane lane, int hostSlots, Consumer<Boolean> apply) {
        Entry e = new Entry(apply, hostSlots);
        lanes.get(lane.ordinal()).addLast(e);
        return e;
    }

    /**
     * Applies what finished on every rank, and returns {@code extra} reduced with MIN over the ranks (this rank's
     * values when there is no group). Every rank calls it at the same point of the same engine call.
     */
    int[] settle(int... extra) {
        if (group == null) {
            return extra;
        }
        int n = lanes.size();
        int[] values = new int[n + COPY_OUTCOMES + extra.length];
        Arrays.fill(values, n, n + COPY_OUTCOMES, 1);
        for (int lane = 0; lane < n; lane++) {
            int lead = 0;
            for (Entry e : lanes.get(lane)) {
                if (!e.isDone() || (lane == Lane.COPIES.ordinal() && lead == COPY_OUTCOMES)) {
                    break;
                }
                if (lane == Lane.COPIES.ordinal()) {
                    values[n + lead] = e.state == Entry.OK ? 1 : 0;
                }
                lead++;
            }
            values[lane] = lead;
        }
        System.arraycopy(extra, 0, values, n + COPY_OUTCOMES, extra.length);
        int[] agreed = local ? values : reduce(group, Site.SETTLE, values);
        copiesApplied = agreed[Lane.COPIES.ordinal()];
        for (int lane = 0; lane < n; lane++) {
            for (int i = 0; i < agreed[lane]; i++) {
                Entry e = lanes.get(lane).pollFirst();
                try {
                    e.apply.accept(lane != Lane.COPIES.ordinal() || agreed[n + i] == 1);
                } catch (RuntimeException failure) {
                    // the rest must still be applied, or this rank's queues fall out of step with the others'
                    LOG.log(Level.ERROR, "applying a finished " + Lane.values()[lane] + " entry failed", failure);
                }
            }
        }
        return Arrays.copyOfRange(agreed, n + COPY_OUTCOMES, agreed.length);
    }

    /** Copies the last {@link #settle} applied: the same on every rank. */
    int copiesApplied() {
        return copiesApplied;
    }

    /** {@code values} reduced with MIN over the ranks at {@code site}; this rank's own without a group. */
    int[] allReduceMin(Site site, int... values) {
        return group == null || local ? values : reduce(group, site, values);
    }

    /** True on every rank when it is true on every rank. */
    boolean allAgree(Site site, boolean value) {
        return allReduceMin(site, value ? 1 : 0)[0] == 1;
    }

    /**
     * The page store's hits for a prefetch, reduced with MIN over the ranks on the prefetch query thread when there is
     * a query group (this rank's own without one). Every rank's query thread calls it once per prefetch, in the order
     * the prefetches started.
     */
    int queryHits(int hits) {
        return queryGroup == null || local ? hits : reduce(queryGroup, Site.QUERY_HITS, new int[] {hits})[0];
    }

    /**
     * {@code values} reduced with MIN over {@code over}'s ranks, with {@code site} and its negation in front, so that a
     * rank calling from another site is seen by every rank (their MIN and MAX differ).
     */
    private int[] reduce(RankGroup over, Site site, int[] values) {
        int[] tagged = new int[values.length + 2];
        tagged[0] = site.ordinal();
        tagged[1] = -site.ordinal();
        System.arraycopy(values, 0, tagged, 2, values.length);
        int[] agreed = over.allReduceMin(tagged, Deadline.after(timeout));
        if (agreed[0] != -agreed[1]) {
            throw new HiCacheException(
                    ErrorCode.RANK_GROUP_FAILED,
                    "the ranks' caches are out of step: this rank "
                            + "reduced at " + site + ", another at "
                            + Site.values()[agreed[0] == site.ordinal() ? -agreed[1] : agreed[0]]
                            + " (every rank must drive its cache with the same calls in the same order)");
        }
        return Arrays.copyOfRange(agreed, 2, agreed.length);
    }

    /**
     * Waits until {@code entry} and everything queued before it in {@code lane} are done here, or {@code deadline};
     * true if they are. The caller then settles, so that every rank applies them together.
     */
    boolean awaitDone(Lane lane, Entry entry, Deadline deadline) {
        for (Entry e : lanes.get(lane.ordinal())) {
            while (!e.isDone()) {
                if (deadline.isOver()) {
                    return false;
                }
                LockSupport.parkNanos(50_000);
            }
            if (e == entry) {
                return true;
            }
        }
        return true;
    }

    /** True when everything queued is done here (and may be applied by the next settle). */
    boolean allDone() {
        for (ArrayDeque<Entry> lane : lanes) {
            for (Entry e : lane) {
                if (!e.isDone()) {
                    return false;
                }
            }
        }
        return true;
    }

    /** True when nothing is queued. */
    boolean isEmpty() {
        for (ArrayDeque<Entry> lane : lanes) {
            if (!lane.isEmpty()) {
                return false;
            }
        }
        return true;
    }

    /** Entries queued in each lane: for tests, which check that ranks' queues stay the same. */
    int[] queued() {
        return lanes.stream().mapToInt(ArrayDeque::size).toArray();
    }

    /** Host slots that queued releases hold. */
    long heldHostSlots() {
        long held = 0;
        for (Entry e : lanes.get(Lane.RELEASES.ordinal())) {
            held += e.hostSlots;
        }
        return held;
    }
}
