package io.hicache.server.daemon;

import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.DecoderException;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Cuts a connection's bytes into frames ({@code length:u32} then {@code length} bytes) of a declared length up to
 * {@code maxFrameBytes}, refused on their declared length before their bytes are buffered; and charges the bytes of a
 * frame still arriving to a budget shared by every connection, so that many connections that each send most of a
 * large frame and stall cannot take the daemon's memory. A frame that would go over the budget is refused with
 * {@link OverBudget} (the handler answers ERROR BUSY and closes); what the connection sends after is discarded.
 *
 * <p>One instance per connection, used on its event loop; the budget is thread-safe.
 */
final class FrameDecoder extends LengthFieldBasedFrameDecoder {
    /** Bytes of partly received frames that all connections may hold together. */
    static final class Budget {
        private final long limitBytes;
        private final AtomicLong heldBytes = new AtomicLong();

        Budget(long limitBytes) {
            this.limitBytes = limitBytes;
        }

        long limitBytes() {
            return limitBytes;
        }

        long heldBytes() {
            return heldBytes.get();
        }

        boolean take(long bytes) {
            long now;
            do {
                now = heldBytes.get();
                if (now + bytes > limitBytes) {
                    return false;
                }
            } while (!heldBytes.compareAndSet(now, now + bytes));
            return true;
        }

        void giveBack(long bytes) {
            heldBytes.addAndGet(-bytes);
        }
    }

    /** A partly received frame did not fit the budget: the handler refuses it. */
    static final class OverBudget extends DecoderException {
        private static final long serialVersionUID = 1L;

        OverBudget(String message) {
            super(message);
        }

        /** Never null: always made with one, which the connection is answered with. */
        @Override
        public String getMessage() {
            return Checks.checkNotNull(super.getMessage(), "the message");
        }
    }

    private final Budget budget;
    /** Bytes of the frame now arriving charged to the budget. */
    private long charged;

    private boolean refused;

    FrameDecoder(int maxFrameBytes, Budget budget) {
        // The limit counts the declared length, which does not include the length field itself.
        super(maxFrameBytes + 4, 0, 4, 0, 4, true);
        this.budget = budget;
        // A PUT of many pages is tens of MiB: merging reads into one buffer would grow it 4 MiB at a time, copying
        // it whole each time; a composite keeps the reads as they came (the pages are copied once, into the slab).
        setCumulator(COMPOSITE_CUMULATOR);
    }

    @Override
    protected @Nullable Object decode(ChannelHandlerContext ctx, ByteBuf in) throws Exception {
        if (refused) {
            in.skipBytes(in.readableBytes());
            return null;
        }
        Object frame = super.decode(ctx, in);
        if (frame != null) {
            uncharge(); // a whole frame: the handler accounts for it from here
            return frame;
        }
        long buffered = in.readableBytes();
        if (buffered > charged) {
            if (!budget.take(buffered - charged)) {
                refused = true;
                uncharge();
                in.skipBytes(in.readableBytes());
                throw new OverBudget("the daemon holds its limit of " + budget.limitBytes() + " bytes of frames still "
                        + "arriving (server.max-partial-frame-bytes); this frame was refused at " + buffered
                        + " bytes");
            }
            charged = buffered;
        }
        return null;
    }

    /** The bytes held that make no whole frame yet (a view: valid until the decoder reads again). */
    ByteBuf held() {
        return internalBuffer();
    }

    @Override
    protected void handlerRemoved0(ChannelHandlerContext ctx) throws Exception {
        uncharge(); // the connection closed, or the decoder was replaced
        super.handlerRemoved0(ctx);
    }

    private void uncharge() {
        budget.giveBack(charged);
        charged = 0;
    }
}
