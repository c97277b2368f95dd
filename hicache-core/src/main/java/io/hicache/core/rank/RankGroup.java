package io.hicache.core.rank;

import io.hicache.core.Deadline;

/**
 * The tensor-parallel ranks of one model instance, as the cache sees them: a few collectives over small int arrays,
 * which every rank calls in the same order, so that the decisions that change the radix tree come out the same on
 * every rank (SGLang reduces the same decisions over its TP group: the minimum of finished backups, of the store's
 * hits and of landed prefetch pages; whether every rank may end a prefetch).
 *
 * <p>Failure is never a hang: a rank that died, that calls out of step (another collective, or arrays of another
 * length) or that does not call before the deadline fails the collective on every rank that is waiting, with
 * {@link io.hicache.core.ErrorCode#RANK_GROUP_FAILED} saying which rank and why, and the group stays failed: every
 * later call fails at once, since the ranks can no longer be known to agree.
 *
 * <p>Thread-safety: a rank calls its collectives from one thread at a time (they are rendezvous points, ordered per
 * rank); {@link #close()} may be called from any thread and fails a collective in progress. The opener of a group owns
 * it and closes it; closing one rank's handle fails the others' next collective.
 */
public interface RankGroup extends AutoCloseable {
    /** This rank's index, {@code 0 .. size() - 1}. */
    int rank();

    /** Ranks in the group. */
    int size();

    /**
     * Every rank's {@code values} reduced element by element with {@code reduction}; every rank passes the same
     * reduction and an array of the same length, and gets the same result.
     *
     * @throws io.hicache.core.HiCacheException {@code RANK_GROUP_FAILED} as described above
     */
    int[] allReduce(Reduction reduction, int[] values, Deadline deadline);

    /** The element-wise minimum of every rank's {@code values}. */
    default int[] allReduceMin(int[] values, Deadline deadline) {
        return allReduce(Reduction.MIN, values, deadline);
    }

    /** The element-wise maximum of every rank's {@code values}. */
    default int[] allReduceMax(int[] values, Deadline deadline) {
        return allReduce(Reduction.MAX, values, deadline);
    }

    /** True on every rank when every rank passed true: a decision all ranks take together or not at all. */
    default boolean allAgree(boolean value, Deadline deadline) {
        return allReduceMin(new int[] {value ? 1 : 0}, deadline)[0] == 1;
    }

    /** Returns once every rank has called it. */
    default void barrier(Deadline deadline) {
        allReduceMin(new int[0], deadline);
    }

    /** Leaves the group; the other ranks' collectives fail from now on. Idempotent. */
    @Override
    void close();
}
