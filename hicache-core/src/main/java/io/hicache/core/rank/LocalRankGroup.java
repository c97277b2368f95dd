package io.hicache.core.rank;

import io.hicache.core.Deadline;
import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.List;

/**
 * A rank group whose ranks are threads of one process: for tests (a model test runs 2 or 4 ranks with different
 * timings) and for an engine that drives several devices from one JVM. {@link #create} makes one handle per rank.
 *
 * <p>Thread-safe (the handles share one {@link Rounds}). Closing any handle fails the group.
 */
public final class LocalRankGroup implements RankGroup {
    private final Rounds rounds;
    private final int rank;
    private final int size;

    private LocalRankGroup(Rounds rounds, int rank, int size) {
        this.rounds = rounds;
        this.rank = rank;
        this.size = size;
    }

    /** A group of {@code size} ranks named {@code name} (in messages): the handle of rank i is element i. */
    public static List<RankGroup> create(String name, int size) {
        Checks.checkPositive(size, "size");
        Rounds rounds = new Rounds(name, size, null);
        List<RankGroup> ranks = new ArrayList<>(size);
        for (int r = 0; r < size; r++) {
            ranks.add(new LocalRankGroup(rounds, r, size));
        }
        return List.copyOf(ranks);
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public int[] allReduce(Reduction reduction, int[] values, Deadline deadline) {
        return rounds.await(rank, rounds.contribute(rank, reduction, values, -1), deadline);
    }

    @Override
    public void close() {
        rounds.fail("rank " + rank + " left the group");
    }
}
