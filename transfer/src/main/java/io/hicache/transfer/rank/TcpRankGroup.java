package io.hicache.transfer.rank;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.rank.Reduction;
import io.hicache.core.rank.Rounds;
import io.hicache.core.util.Checks;
import io.hicache.transfer.frame.FrameServer;
import io.hicache.transfer.frame.NettyLoops;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * A rank group across processes, on one host or several, over TCP: rank 0 listens ({@link #listen}), the others
 * connect to it ({@link #join}); every collective's contributions go to rank 0, which reduces them
 * ({@link Rounds}) and sends the result to every rank. A rank whose connection drops (its process died) fails the
 * group on every rank at once; a rank that does not call fails it at the deadline of those waiting for it; either
 * way rank 0 tells the others why, and closes the connections.
 *
 * <p>Thread-safe as {@link RankGroup} says. Owns its event loop thread and its connections; {@link #close()} ends them.
 */
public final class TcpRankGroup implements RankGroup {
    private final String name;
    private final int rank;
    private final int size;
    private final EventLoopGroup loops;
    /** Rank 0: the listener; null elsewhere. */
    private final @Nullable FrameServer server;
    /** Rank 0: the reduction; elsewhere: the results as they come back (contributions are not folded there). */
    private final Rounds rounds;
    /** Rank 0: each member's connection, once it has contributed. */
    private final Map<Integer, Channel> members = new ConcurrentHashMap<>();
    /** Elsewhere: the connection to rank 0. */
    private final @Nullable MemberConnection toCoordinator;

    private long nextRound;

    private TcpRankGroup(
            String name,
            int rank,
            int size,
            EventLoopGroup loops,
            @Nullable FrameServer server,
            Rounds rounds,
            @Nullable MemberConnection toCoordinator) {
        this.name = name;
        this.rank = rank;
        this.size = size;
        this.loops = loops;
        this.server = server;
        this.rounds = rounds;
        this.toCoordinator = toCoordinator;
    }

    /**
     * Rank 0 of group {@code name} of {@code size} ranks, listening on {@code bindHost:port} (0: a free port, see
     * {@link #port()}). The other ranks may join at any time before their first collective; rank 0's first collective
     * waits for them until its deadline.
     */
    public static TcpRankGroup listen(String name, int size, String bindHost, int port) {
        Checks.checkNotNull(name, "name");
        Checks.checkPositive(size, "size");
        EventLoopGroup loops = NettyLoops.group("hicache-rank-" + name, 1);
        Forwarder forwarder = new Forwarder();
        Rounds rounds = new Rounds(name, size, forwarder);
        try {
            TcpRankGroup[] self = new TcpRankGroup[1];
            FrameServer server = FrameServer.bind(
                    loops,
                    bindHost,
                    port,
                    0,
                    "hicache-rank-" + name,
                    "rank group '" + name + "' cannot listen on " + bindHost + ":" + port,
                    () -> new CoordinatorHandler(name, size, rounds, self[0].members));
            self[0] = new TcpRankGroup(name, 0, size, loops, server, rounds, null);
            forwarder.group = self[0];
            return self[0];
        } catch (RuntimeException e) {
            loops.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            throw e;
        }
    }

    /**
     * Rank {@code rank} (1 or more) of group {@code name} of {@code size} ranks, connected to rank 0 at
     * {@code host:port} within {@code connectTimeout}.
     *
     * @throws HiCacheException {@code RANK_GROUP_FAILED} when rank 0 cannot be reached in time
     */
    public static TcpRankGroup join(String name, int rank, int size, String host, int port, Duration connectTimeout) {
        Checks.checkNotNull(name, "name");
        Checks.requireArgument(rank > 0 && rank < size, "rank must be in [1, %s), was %s", size, rank);
        EventLoopGroup loops = NettyLoops.group("hicache-rank-" + name + "-" + rank, 1);
        MemberConnection[] connection = new MemberConnection[1];
        // one contributor here, the coordinator's results; a failure seen here (a deadline) drops the connection,
        // which fails the group at rank 0 and so on every rank
        Rounds results = new Rounds(name, 1, new Rounds.Listener() {
            @Override
            public void completed(long round, int[] result) {}

            @Override
            public void failed(String why) {
                MemberConnection c = connection[0];
                if (c != null) {
                    c.close(why);
                }
            }
        });
        try {
            connection[0] = MemberConnection.open(
                    loops, host, port, connectTimeout, RankFrames.hello(name, rank, size), results);
            return new TcpRankGroup(name, rank, size, loops, null, results, connection[0]);
        } catch (RuntimeException e) {
            loops.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            throw e;
        }
    }

    /** Rank 0's listening port; -1 on the other ranks. */
    public int port() {
        return server == null ? -1 : server.port();
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
    public synchronized int[] allReduce(Reduction reduction, int[] values, Deadline deadline) {
        Checks.checkNotNull(values, "values");
        if (server != null) {
            return rounds.await(0, rounds.contribute(0, reduction, values, -1), deadline);
        }
        long round = nextRound++;
        Checks.checkNotNull(toCoordinator, "a member rank's connection").contribute(round, reduction, values);
        return rounds.await(rank, round, deadline);
    }

    @Override
    public void close() {
        rounds.fail("rank " + rank + " left the group");
        if (server != null) {
            server.close();
        } else {
            Checks.checkNotNull(toCoordinator, "a member rank's connection").close("rank " + rank + " left the group");
        }
        loops.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }

    /** Rank 0: sends each completed round's result to every member, and the failure, then closes them. */
    private static final class Forwarder implements Rounds.Listener {
        /** Set once rank 0 is listening; null before. */
        volatile @Nullable TcpRankGroup group;

        @Override
        public void completed(long round, int[] result) {
            // a round completes only with rank 0's own contribution, made on the group listen returned
            TcpRankGroup g = Checks.checkNotNull(group, "the group of a completed round");
            byte[] payload = RankFrames.encode(result);
            for (Channel c : g.members.values()) {
                CoordinatorHandler.send(c, RankFrames.RESULT, round, 0, payload);
            }
        }

        @Override
        public void failed(String why) {
            TcpRankGroup g = group;
            if (g == null) {
                return;
            }
            for (Channel c : g.members.values()) {
                CoordinatorHandler.fail(c, why);
            }
        }
    }

    static HiCacheException failure(String message, Throwable cause) {
        return new HiCacheException(ErrorCode.RANK_GROUP_FAILED, message, cause);
    }

    static <T> T await(CompletableFuture<T> f, Duration timeout, String what) {
        try {
            return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            // a future that failed has its cause
            Throwable cause = Checks.checkNotNull(e.getCause(), "a failed future's cause");
            throw failure(what + ": " + cause.getMessage(), cause);
        } catch (TimeoutException e) {
            throw failure(what + ": no answer within " + timeout.toMillis() + " ms", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw failure(what + ": interrupted", e);
        }
    }
}
