package io.hicache.transfer.rank;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.rank.Reduction;
import io.hicache.testkit.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Issue 19, part 2: the rank group across processes: right answers, and failures that never hang. */
class TcpRankGroupTest {
    private static final Duration WAIT = Duration.ofSeconds(20);

    /** Rank 0 listening on a free loopback port and ranks 1.. joined to it. */
    private static List<RankGroup> group(String name, int size) {
        TcpRankGroup zero = TcpRankGroup.listen(name, size, "127.0.0.1", 0);
        List<RankGroup> ranks = new ArrayList<>(List.of(zero));
        for (int r = 1; r < size; r++) {
            ranks.add(TcpRankGroup.join(name, r, size, "127.0.0.1", zero.port(), WAIT));
        }
        return ranks;
    }

    private static void closeAll(List<RankGroup> ranks) {
        for (int r = ranks.size() - 1; r >= 0; r--) {
            ranks.get(r).close();
        }
    }

    @FunctionalInterface
    interface RankBody<T> {
        T run(RankGroup rank) throws Exception;
    }

    private static <T> List<T> onEveryRank(List<RankGroup> ranks, RankBody<T> body) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(ranks.size());
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (RankGroup g : ranks) {
                futures.add(threads.submit(() -> body.run(g)));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : futures) {
                out.add(f.get(60, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            threads.shutdownNow();
        }
    }

    @Test
    void threeRanksAgreeOnEveryReductionRoundAfterRound() throws Exception {
        List<RankGroup> ranks = group("agree", 3);
        try {
            int rounds = 300;
            List<int[][]> got = onEveryRank(ranks, g -> {
                int[][] out = new int[rounds][];
                SplittableRandom jitter = new SplittableRandom(g.rank());
                for (int i = 0; i < rounds; i++) {
                    if (jitter.nextInt(40) == 0) {
                        Thread.sleep(1);
                    }
                    int[] mine = contribution(g.rank(), i);
                    out[i] = i % 2 == 0
                            ? g.allReduceMin(mine, Deadline.after(WAIT))
                            : g.allReduceMax(mine, Deadline.after(WAIT));
                }
                return out;
            });
            for (int i = 0; i < rounds; i++) {
                int[] expect = contribution(0, i);
                for (int r = 1; r < 3; r++) {
                    (i % 2 == 0 ? Reduction.MIN : Reduction.MAX).fold(expect, contribution(r, i));
                }
                for (int r = 0; r < 3; r++) {
                    assertArrayEquals(expect, got.get(r)[i], "round " + i + ", rank " + r);
                }
            }
            assertEquals(
                    List.of(false, false, false),
                    onEveryRank(ranks, g -> g.allAgree(g.rank() != 2, Deadline.after(WAIT))));
        } finally {
            closeAll(ranks);
        }
    }

    private static int[] contribution(int rank, int round) {
        SplittableRandom r = new SplittableRandom(31L * round + rank);
        return new int[] {r.nextInt(-500, 500), r.nextInt(-500, 500), r.nextInt()};
    }

    @Test
    void aRankThatDoesNotCallFailsTheOthersAtTheirDeadline() throws Exception {
        List<RankGroup> ranks = group("late", 3);
        try {
            long start = System.nanoTime();
            List<String> messages = onEveryRank(ranks.subList(0, 2), g -> {
                HiCacheException e =
                        assertThrows(HiCacheException.class, () -> g.barrier(Deadline.after(Duration.ofMillis(300))));
                assertEquals(ErrorCode.RANK_GROUP_FAILED, e.code());
                return e.getMessage();
            });
            long millis = (System.nanoTime() - start) / 1_000_000;
            assertTrue(millis < 10_000, "failed after " + millis + " ms");
            assertTrue(messages.get(0).contains("rank 2"), messages.toString());
            assertThrows(
                    HiCacheException.class, () -> ranks.get(2).barrier(Deadline.after(WAIT)), "the group stays failed");
        } finally {
            closeAll(ranks);
        }
    }

    @Test
    void aRankThatLeavesFailsTheOthersAtOnce() throws Exception {
        List<RankGroup> ranks = group("leave", 3);
        try {
            onEveryRank(ranks, g -> {
                g.barrier(Deadline.after(WAIT));
                return null;
            });
            ExecutorService t = Executors.newFixedThreadPool(2);
            try {
                Future<String> zero = t.submit(() -> assertThrows(
                                HiCacheException.class,
                                () -> ranks.get(0).barrier(Deadline.after(Duration.ofSeconds(60))))
                        .getMessage());
                Future<String> one = t.submit(() -> assertThrows(
                                HiCacheException.class,
                                () -> ranks.get(1).barrier(Deadline.after(Duration.ofSeconds(60))))
                        .getMessage());
                Thread.sleep(100);
                ranks.get(2).close();
                String m0 = zero.get(10, TimeUnit.SECONDS);
                String m1 = one.get(10, TimeUnit.SECONDS);
                assertTrue(m0.contains("rank 2"), m0);
                assertTrue(m1.contains("rank 2"), "rank 0 told rank 1 why: " + m1);
            } finally {
                t.shutdownNow();
            }
        } finally {
            closeAll(ranks);
        }
    }

    @Test
    void aStrangerIsTurnedAwayAndTheGroupGoesOn() throws Exception {
        TcpRankGroup zero = TcpRankGroup.listen("right", 2, "127.0.0.1", 0);
        RankGroup stranger = TcpRankGroup.join("wrong", 1, 2, "127.0.0.1", zero.port(), WAIT);
        RankGroup one = TcpRankGroup.join("right", 1, 2, "127.0.0.1", zero.port(), WAIT);
        try {
            HiCacheException e = assertThrows(
                    HiCacheException.class, () -> stranger.barrier(Deadline.after(Duration.ofSeconds(10))));
            assertTrue(e.getMessage().contains("not a rank of group 'right'"), e.getMessage());
            assertEquals(
                    List.of(7, 7),
                    onEveryRank(
                            List.of(zero, one),
                            g -> g.allReduceMax(new int[] {g.rank() + 6}, Deadline.after(WAIT))[0]));
        } finally {
            stranger.close();
            one.close();
            zero.close();
        }
    }

    /** A member process killed with SIGKILL: the survivors' collectives fail at once, not at their deadline. */
    @Test
    void aKilledMemberProcessFailsTheGroupAtOnce() throws Exception {
        TcpRankGroup zero = TcpRankGroup.listen("killed", 3, "127.0.0.1", 0);
        RankGroup one = TcpRankGroup.join("killed", 1, 3, "127.0.0.1", zero.port(), WAIT);
        ChildJvm two = ChildJvm.start(MemberMain.class, List.of("killed", "2", "3", Integer.toString(zero.port())));
        try {
            assertEquals(
                    List.of(3, 3),
                    onEveryRank(
                            List.of(zero, one), g -> g.allReduceMax(new int[] {g.rank() + 1}, Deadline.after(WAIT))[0]),
                    "the child took part");
            assertTrue(two.awaitLine("round 0: 3", 30, TimeUnit.SECONDS), "the child got the result: " + two.lines());
            long start = System.nanoTime();
            ExecutorService t = Executors.newFixedThreadPool(2);
            try {
                Future<String> a = t.submit(() -> assertThrows(
                                HiCacheException.class, () -> zero.barrier(Deadline.after(Duration.ofSeconds(60))))
                        .getMessage());
                Future<String> b = t.submit(() -> assertThrows(
                                HiCacheException.class, () -> one.barrier(Deadline.after(Duration.ofSeconds(60))))
                        .getMessage());
                two.kill();
                String ma = a.get(20, TimeUnit.SECONDS);
                b.get(20, TimeUnit.SECONDS);
                long millis = (System.nanoTime() - start) / 1_000_000;
                assertTrue(millis < 15_000, "failed after " + millis + " ms, not at once");
                assertTrue(ma.contains("rank 2"), ma);
            } finally {
                t.shutdownNow();
            }
        } finally {
            two.kill();
            one.close();
            zero.close();
        }
    }

    /** A member rank in a child JVM: joins, takes part in one MAX round, prints it, then waits to be killed. */
    public static final class MemberMain {
        public static void main(String[] args) throws Exception {
            RankGroup g = TcpRankGroup.join(
                    args[0],
                    Integer.parseInt(args[1]),
                    Integer.parseInt(args[2]),
                    "127.0.0.1",
                    Integer.parseInt(args[3]),
                    Duration.ofSeconds(20));
            int[] r = g.allReduceMax(new int[] {g.rank() + 1}, Deadline.after(Duration.ofSeconds(30)));
            System.out.println("round 0: " + r[0]);
            System.out.flush();
            Thread.sleep(120_000);
        }
    }
}
