package io.hicache.core.rank;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * The rounds of a rank group where they are reduced (every rank's handle in {@link LocalRankGroup}; rank 0 of a group
 * across processes): each collective is a round; ranks' contributions are folded as they arrive, in any order; the
 * last one completes the round, and every rank waiting for it gets the result. Once failed (a rank out of step, a
 * deadline passed, a rank gone) it stays failed.
 *
 * <p>Thread-safe: one lock. Listeners run under it, on the thread that completed or failed the round; they must not
 * block (a network send that queues is fine).
 */
public final class Rounds {
    /** Hears of each completed round and of the failure, for a group that forwards them to other processes. */
    public interface Listener {
        void completed(long round, int[] result);

        void failed(String why);
    }

    private final String name;
    private final int size;
    private final @Nullable Listener listener;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition roundDone = lock.newCondition();
    // guarded by lock
    private long round;
    private @Nullable Reduction op;
    private int @Nullable [] folded;
    private final boolean[] arrived;
    private int arrivals;
    private int @Nullable [] result;
    private long resultRound = -1;
    private @Nullable String failure;

    /** The rounds of group {@code name} (in messages) of {@code size} ranks; {@code listener} may be null. */
    public Rounds(String name, int size, @Nullable Listener listener) {
        this.name = Checks.checkNotNull(name, "name");
        this.size = Checks.checkPositive(size, "size");
        this.listener = listener;
        this.arrived = new boolean[size];
    }

    /**
     * Adds {@code rank}'s contribution to the round in progress and returns that round's number; when it is the last,
     * the round completes. {@code expectedRound}, when not negative, is the round the rank believes it is in: another
     * number means the ranks are out of step, and fails the group.
     *
     * @throws HiCacheException {@code RANK_GROUP_FAILED} when the group has failed, or fails now
     */
    public long contribute(int rank, Reduction reduction, int[] values, long expectedRound) {
        Checks.checkNotNull(values, "values");
        lock.lock();
        try {
            checkHealthy();
            long mine = round;
            if (expectedRound >= 0 && expectedRound != mine) {
                failLocked("rank " + rank + " sent round " + expectedRound + " while the group is in round " + mine
                        + ": the ranks are out of step");
            } else if (arrived[rank]) {
                failLocked("rank " + rank + " called twice in round " + mine + ": the ranks are out of step");
            } else if (arrivals == 0) {
                op = reduction;
                folded = values.clone();
            } else if (op != reduction || folded == null || folded.length != values.length) {
                failLocked("rank " + rank + " called " + reduction + " of " + values.length + " values in round " + mine
                        + " where the others called " + op + " of " + (folded == null ? 0 : folded.length)
                        + ": the ranks are out of step");
            } else {
                reduction.fold(folded, values);
            }
            checkHealthy();
            arrived[rank] = true;
            arrivals++;
            if (arrivals == size) {
                int[] all = Checks.checkNotNull(folded, "the folded values of a round every rank joined");
                result = all;
                resultRound = mine;
                round++;
                arrivals = 0;
                Arrays.fill(arrived, false);
                if (listener != null) {
                    listener.completed(mine, all.clone());
                }
                roundDone.signalAll();
            }
            return mine;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits until round {@code round} has completed and returns its result; a deadline that passes first fails the
     * group, naming the ranks that had not called.
     *
     * @throws HiCacheException {@code RANK_GROUP_FAILED}
     */
    public int[] await(int rank, long round, Deadline deadline) {
        Checks.checkNotNull(deadline, "deadline");
        lock.lock();
        try {
            while (resultRound < round) {
                checkHealthy();
                long left = deadline.remainingNanos();
                if (left <= 0 || deadline.isCancelled()) {
                    failLocked(
                            "rank " + rank + " waited for " + missing() + " in round " + round + " until its deadline");
                    checkHealthy();
                }
                try {
                    roundDone.awaitNanos(Math.min(left, TimeUnit.MILLISECONDS.toNanos(50)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    failLocked("rank " + rank + " was interrupted in round " + round);
                    checkHealthy();
                }
            }
            checkHealthy();
            return Checks.checkNotNull(result, "the result of a finished round").clone();
        } finally {
            lock.unlock();
        }
    }

    /** Fails the group with {@code why} (the first reason stays); wakes every waiting rank. */
    public void fail(String why) {
        lock.lock();
        try {
            failLocked(why);
        } finally {
            lock.unlock();
        }
    }

    /** Why the group failed, or null while it has not. */
    public @Nullable String failure() {
        lock.lock();
        try {
            return failure;
        } finally {
            lock.unlock();
        }
    }

    private void failLocked(String why) {
        if (failure == null) {
            failure = why;
            if (listener != null) {
                listener.failed(why);
            }
        }
        roundDone.signalAll();
    }

    private String missing() {
        StringBuilder b = new StringBuilder();
        int count = 0;
        for (int r = 0; r < size; r++) {
            if (!arrived[r]) {
                b.append(count++ == 0 ? "" : ", ").append(r);
            }
        }
        return (count == 1 ? "rank " : "ranks ") + b;
    }

    private void checkHealthy() {
        if (failure != null) {
            throw new HiCacheException(ErrorCode.RANK_GROUP_FAILED, "rank group '" + name + "' failed: " + failure);
        }
    }
}
