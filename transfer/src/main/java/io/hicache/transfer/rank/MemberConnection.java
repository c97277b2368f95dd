package io.hicache.transfer.rank;

import io.hicache.core.HiCacheException;
import io.hicache.core.rank.Reduction;
import io.hicache.core.rank.Rounds;
import io.hicache.core.util.Checks;
import io.hicache.transfer.frame.FrameClient;
import io.hicache.transfer.frame.Frames;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.EventLoopGroup;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * A member rank's connection to rank 0: sends its contributions, and hands each result (or the group's failure) to
 * the member's {@link Rounds} of one contributor, where its collective waits. Thread-safe as {@link FrameClient};
 * the member's group owns it.
 */
final class MemberConnection extends FrameClient {
    private final Rounds results;

    private MemberConnection(String label, Rounds results) {
        super(RankFrames.MAGIC, label);
        this.results = results;
    }

    static MemberConnection open(
            EventLoopGroup loops, String host, int port, Duration timeout, String hello, Rounds results) {
        MemberConnection c = new MemberConnection(hello + " to rank 0 at " + host + ":" + port, results);
        return TcpRankGroup.await(
                connect(c, loops, host, port, timeout.toMillis(), 0, hello),
                timeout,
                "rank group: cannot reach rank 0 at " + host + ":" + port);
    }

    /** Sends this rank's contribution to round {@code round}. */
    void contribute(long round, Reduction reduction, int[] values) {
        if (!isOpen()) {
            results.fail("the connection to rank 0 is closed: " + closeReasonOr("?"));
            return;
        }
        CoordinatorHandler.send(
                channel(), RankFrames.CONTRIBUTE, round, RankFrames.code(reduction), RankFrames.encode(values));
    }

    @Override
    protected @Nullable MemorySegment payloadTarget(Frames.Header h) {
        return null;
    }

    @Override
    protected void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        if (h.type() == RankFrames.RESULT) {
            try {
                results.contribute(0, Reduction.MIN, RankFrames.decode(payload), h.id());
            } catch (HiCacheException e) {
                close(Checks.checkNotNull(e.getMessage(), "a HiCacheException's message"));
            }
        } else if (h.type() == Frames.ERROR) {
            results.fail(payload == null ? "rank 0 failed the group" : new String(payload, StandardCharsets.UTF_8));
        } else {
            results.fail("rank 0 sent frame type " + h.type() + ", which this rank does not know");
            close("protocol error");
        }
    }

    @Override
    protected void closed(String reason) {
        results.fail("the connection to rank 0 closed: " + reason);
    }
}
