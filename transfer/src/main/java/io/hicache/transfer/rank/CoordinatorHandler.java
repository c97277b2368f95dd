package io.hicache.transfer.rank;

import io.hicache.core.HiCacheException;
import io.hicache.core.rank.Rounds;
import io.hicache.core.util.Checks;
import io.hicache.transfer.frame.FrameServerHandler;
import io.hicache.transfer.frame.Frames;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Rank 0's side of one member's connection: checks its hello (this group, a rank in range, not taken), adds its
 * contributions to the rounds, and fails the group when the connection drops. Runs on the connection's event loop;
 * the listener owns it.
 */
final class CoordinatorHandler extends FrameServerHandler {
    private final String group;
    private final int size;
    private final Rounds rounds;
    private final Map<Integer, Channel> members;
    /** The member's rank once its hello was accepted; -1 before. */
    private int rank = -1;

    CoordinatorHandler(String group, int size, Rounds rounds, Map<Integer, Channel> members) {
        super(RankFrames.MAGIC, "rank group");
        this.group = group;
        this.size = size;
        this.rounds = rounds;
        this.members = members;
    }

    @Override
    protected @Nullable MemorySegment payloadTarget(Frames.Header h) {
        return null; // every payload is a few ints or a reason: collected
    }

    @Override
    protected void connected(String from, int delta) {
        if (delta < 0 && rank > 0 && members.remove(rank) != null) {
            rounds.fail("rank " + rank + "'s connection closed (its process died or left)");
        }
    }

    @Override
    protected boolean onRequest(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        if (h.type() != RankFrames.CONTRIBUTE) {
            return false;
        }
        if (rank < 0 && !accept(ctx.channel())) {
            return true;
        }
        try {
            rounds.contribute(rank, RankFrames.reduction(h.region()), RankFrames.decode(payload), h.id());
        } catch (HiCacheException | IllegalStateException e) {
            // the group has failed; the listener told the others (the rounds' failures say why)
            fail(ctx.channel(), Checks.checkNotNull(e.getMessage(), "a rank group failure's message"));
        }
        return true;
    }

    /** Checks the member's hello on its first contribution; refuses (and closes) one of another group or a bad rank. */
    private boolean accept(Channel channel) {
        String[] parts = peer().split("#");
        String problem = null;
        int r = -1;
        if (parts.length != 3 || !parts[0].equals(group)) {
            problem = "'" + peer() + "' is not a rank of group '" + group + "'";
        } else {
            try {
                r = Integer.parseInt(parts[1]);
                if (Integer.parseInt(parts[2]) != size || r <= 0 || r >= size) {
                    problem = "rank " + parts[1] + " of " + parts[2] + " does not fit group '" + group + "' of " + size;
                }
            } catch (NumberFormatException e) {
                problem = "'" + peer() + "' names no rank";
            }
        }
        if (problem == null && members.putIfAbsent(r, channel) != null) {
            problem = "rank " + r + " is in the group already";
        }
        if (problem != null) {
            fail(channel, problem); // a stranger is turned away; the group goes on
            return false;
        }
        rank = r;
        return true;
    }

    /** Sends one frame on {@code channel}, from any thread. */
    static void send(Channel channel, byte type, long id, int region, byte[] payload) {
        channel.writeAndFlush(Unpooled.wrappedBuffer(
                Frames.header(channel.alloc(), RankFrames.MAGIC, type, region, id, 0, payload.length),
                Unpooled.wrappedBuffer(payload)));
    }

    /** Tells the member why, then closes its connection. */
    static void fail(Channel channel, String why) {
        byte[] reason = why.getBytes(StandardCharsets.UTF_8);
        channel.writeAndFlush(Unpooled.wrappedBuffer(
                        Frames.header(channel.alloc(), RankFrames.MAGIC, Frames.ERROR, 0, 0, 0, reason.length),
                        Unpooled.wrappedBuffer(reason)))
                .addListener(ChannelFutureListener.CLOSE);
    }
}
