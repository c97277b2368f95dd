package io.hicache.core.rank;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class LocalRankGroupTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    /** Each rank runs {@code body} on its own thread; returns what each returned, in rank order. */
    static <T> List<T> onEveryRank(List<RankGroup> ranks, RankBody<T> body) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(ranks.size());
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (RankGroup g : ranks) {
                futures.add(threads.submit(() -> body.run(g)));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : futures) {
                out.add(f.get());
            }
            return out;
        } finally {
            threads.shutdownNow();
        }
    }

    @FunctionalInterface
    interface RankBody<T> {
        T run(RankGroup rank) throws Exception;
    }

    @Test
    void everyRankGetsTheElementwiseMinimumAndMaximumRoundAfterRound() throws Exception {
        for (int size : new int[] {1, 2, 4}) {
            List<RankGroup> ranks = LocalRankGroup.create("g" + size, size);
            int rounds = 500;
            // the values each rank contributes, known in advance so the test can compute the answers
            int[][][] values = new int[size][rounds][3];
            SplittableRandom random = new SplittableRandom(size);
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < rounds; i++) {
                    for (int k = 0; k < 3; k++) {
                        values[r][i][k] = random.nextInt(-1000, 1000);
                    }
                }
            }
            List<int[][]> results = onEveryRank(ranks, g -> {
                int[][] got = new int[rounds][];
                SplittableRandom jitter = new SplittableRandom(g.rank());
                for (int i = 0; i < rounds; i++) {
                    if (jitter.nextInt(50) == 0) {
                        Thread.sleep(1); // ranks arrive in every order
                    }
                    got[i] = i % 2 == 0
                            ? g.allReduceMin(values[g.rank()][i], Deadline.after(WAIT))
                            : g.allReduceMax(values[g.rank()][i], Deadline.after(WAIT));
                }
                return got;
            });
            for (int i = 0; i < rounds; i++) {
                int[] expect = values[0][i].clone();
                for (int r = 1; r < size; r++) {
                    (i % 2 == 0 ? Reduction.MIN : Reduction.MAX).fold(expect, values[r][i]);
                }
                for (int r = 0; r < size; r++) {
                    assertArrayEquals(expect, results.get(r)[i], "size " + size + ", round " + i + ", rank " + r);
                }
            }
        }
    }

    @Test
    void agreementNeedsEveryRank() throws Exception {
        List<RankGroup> ranks = LocalRankGroup.create("agree", 3);
        assertEquals(List.of(true, true, true), onEveryRank(ranks, g -> g.allAgree(true, Deadline.after(WAIT))));
        assertEquals(
                List.of(false, false, false), onEveryRank(ranks, g -> g.allAgree(g.rank() != 1, Deadline.after(WAIT))));
        assertEquals(List.of(3, 3, 3), onEveryRank(ranks, g -> {
            g.barrier(Deadline.after(WAIT));
            return g.size();
        }));
    }

    @Test
    void aRankThatNeverComesFailsTheOthersByTheirDeadline() throws Exception {
        List<RankGroup> ranks = LocalRankGroup.create("late", 3);
        long start = System.nanoTime();
        List<String> errors = onEveryRank(ranks.subList(0, 2), g -> {
            HiCacheException e = assertThrows(
                    HiCacheException.class,
                    () -> g.allReduceMin(new int[] {1}, Deadline.after(Duration.ofMillis(200))));
            assertEquals(ErrorCode.RANK_GROUP_FAILED, e.code());
            return e.getMessage();
        });
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(millis < 5_000, "failed after " + millis + " ms, not by the 200 ms deadline");
        assertTrue(errors.stream().allMatch(m -> m.contains("rank 2")), errors::toString);
        // the group stays failed: even the rank that never came cannot use it
        assertThrows(HiCacheException.class, () -> ranks.get(2).allReduceMin(new int[] {1}, Deadline.after(WAIT)));
    }

    @Test
    void ranksOutOfStepFailTogether() throws Exception {
        List<RankGroup> ranks = LocalRankGroup.create("step", 2);
        List<Boolean> failed = onEveryRank(ranks, g -> {
            try {
                if (g.rank() == 0) {
                    g.allReduceMin(new int[] {1, 2}, Deadline.after(WAIT));
                } else {
                    g.allReduceMax(new int[] {1, 2}, Deadline.after(WAIT));
                }
                return false;
            } catch (HiCacheException e) {
                return e.getMessage().contains("out of step");
            }
        });
        assertEquals(List.of(true, true), failed);
    }

    @Test
    void aRankThatLeavesFailsTheOthersAtOnce() throws Exception {
        List<RankGroup> ranks = LocalRankGroup.create("leave", 2);
        ExecutorService t = Executors.newSingleThreadExecutor();
        try {
            Future<String> waiting = t.submit(() -> assertThrows(
                            HiCacheException.class, () -> ranks.get(0).barrier(Deadline.after(Duration.ofSeconds(60))))
                    .getMessage());
            Thread.sleep(50);
            long start = System.nanoTime();
            ranks.get(1).close();
            String message = waiting.get();
            assertTrue((System.nanoTime() - start) / 1_000_000 < 5_000, "the waiting rank was not woken");
            assertTrue(message.contains("rank 1 left"), message);
        } finally {
            t.shutdownNow();
        }
    }
}
