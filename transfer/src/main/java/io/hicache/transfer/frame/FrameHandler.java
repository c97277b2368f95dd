package io.hicache.transfer.frame;

import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.DefaultMaxMessagesRecvByteBufAllocator;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * Reads frames so that page payloads land straight in their destination memory: the channel's receive buffer
 * allocator asks this handler for the next buffer, and while a payload has a destination the buffer it hands out
 * wraps that destination, so the socket read writes into registered memory and no byte is copied in user space.
 * Headers and control payloads are read into small pooled buffers.
 *
 * <p>Runs on its channel's event loop only. Subclasses decide where payloads go; the handler belongs to one channel.
 */
public abstract class FrameHandler extends ChannelInboundHandlerAdapter {
    /** Marker target for payload bytes to drop. */
    protected static final MemorySegment DISCARD = MemorySegment.NULL;

    private static final int CONTROL_READ_BYTES = 64 << 10;

    private final int magic;
    private final ByteBuf header = Unpooled.directBuffer(Frames.HEADER_BYTES);
    /** The frame being read, with its length set to its payload's. */
    private Frames.@Nullable Header current;
    /** The frame as sent. */
    private Frames.@Nullable Header asked;
    /** Where the current payload goes: memory, or null for a control payload (collected) or discarded bytes. */
    private @Nullable MemorySegment target;

    private byte @Nullable [] control;
    private int payloadFilled;
    /** The last buffer that wraps a payload target: bytes read into it are already in place. */
    private @Nullable ByteBuf handedOut;

    /** A handler for the protocol whose headers carry {@code magic}. */
    protected FrameHandler(int magic) {
        this.magic = magic;
    }

    /** Installs the allocator that serves this handler's buffers; call before the channel is registered. */
    public final void install(Channel channel) {
        channel.config().setRecvByteBufAllocator(new Allocator());
    }

    /** A header of this handler's protocol in a fresh buffer that the caller writes (and Netty releases). */
    protected final ByteBuf header(ByteBufAllocator alloc, byte type, int region, long id, long offset, int length) {
        return Frames.header(alloc, magic, type, region, id, offset, length);
    }

    /**
     * Where the payload of {@code h} goes: a segment of exactly {@code h.length()} bytes, or null to collect it as
     * a control payload ({@link #onFrame} gets it), or {@link #DISCARD} to drop it.
     */
    protected abstract @Nullable MemorySegment payloadTarget(Frames.Header h);

    /** A frame is complete. {@code payload} is the collected control payload, else null. */
    protected abstract void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload);

    /** Bytes of payload that follow header {@code h}: its length, except for requests whose length is asked for. */
    protected int payloadBytes(Frames.Header h) {
        return h.length();
    }

    /**
     * How many bytes may be read at once while no frame is under way. Anything read past the next header is parsed from
     * that buffer, and a payload that has a target is then copied once instead of landing in place; so a subclass that
     * knows the frames ahead carry no such payload (a run of acknowledgements) returns their length here, and one
     * read takes them all rather than one read per header. 0 here: one header at a time.
     */
    protected int headerReadAheadBytes() {
        return 0;
    }

    private ByteBuf nextBuffer(ByteBufAllocator alloc) {
        if (current == null) {
            return alloc.directBuffer(Math.max(Frames.HEADER_BYTES - header.writerIndex(), headerReadAheadBytes()));
        }
        int remaining = current.length() - payloadFilled;
        if (target != null && target != DISCARD) {
            handedOut = Unpooled.wrappedBuffer(
                            target.asSlice(payloadFilled, remaining).asByteBuffer())
                    .clear();
            return handedOut;
        }
        return alloc.directBuffer(Math.min(remaining, CONTROL_READ_BYTES));
    }

    @Override
    public final void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf in = (ByteBuf) msg;
        try {
            while (in.isReadable()) {
                if (current == null) {
                    int n = Math.min(in.readableBytes(), Frames.HEADER_BYTES - header.writerIndex());
                    header.writeBytes(in, n);
                    if (header.writerIndex() == Frames.HEADER_BYTES) {
                        startFrame(ctx, Frames.Header.parse(header, magic));
                        header.clear();
                    }
                } else {
                    int n = Math.min(in.readableBytes(), current.length() - payloadFilled);
                    if (target == null) {
                        in.readBytes(control, payloadFilled, n);
                    } else if (target != DISCARD && in != handedOut) {
                        // bytes that arrived in a buffer we did not hand out (another handler's), copied once
                        MemorySegment.copy(
                                MemorySegment.ofBuffer(in.nioBuffer(in.readerIndex(), n)), 0, target, payloadFilled, n);
                        in.skipBytes(n);
                    } else {
                        in.skipBytes(n);
                    }
                    payloadFilled += n;
                    if (payloadFilled == current.length()) {
                        finishFrame(ctx);
                    }
                }
            }
        } finally {
            if (in == handedOut) {
                handedOut = null;
            }
            in.release();
        }
    }

    private void startFrame(ChannelHandlerContext ctx, Frames.Header h) {
        int payload = payloadBytes(h);
        current = payload == h.length() ? h : new Frames.Header(h.type(), h.region(), h.id(), h.offset(), payload);
        asked = h;
        payloadFilled = 0;
        if (payload == 0) {
            target = DISCARD;
            finishFrame(ctx);
            return;
        }
        target = payloadTarget(h);
        if (target == null) {
            if (h.length() > Frames.MAX_CONTROL_PAYLOAD) {
                throw new IllegalStateException("control payload of " + h.length() + " bytes is over the limit");
            }
            control = new byte[h.length()];
        } else if (target != DISCARD && target.byteSize() != h.length()) {
            throw new IllegalStateException(
                    "payload target of " + target.byteSize() + " bytes for a frame of " + h.length());
        }
    }

    private void finishFrame(ChannelHandlerContext ctx) {
        // startFrame set it, with current, for the frame this finishes
        Frames.Header h = Checks.checkNotNull(asked, "the header of the frame under way");
        byte[] payload = target == null ? control : null;
        current = null;
        target = null;
        control = null;
        onFrame(ctx, h, payload);
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        header.release();
    }

    /** Hands out the buffers {@link #nextBuffer} chooses, with Netty's usual read loop accounting. */
    private final class Allocator extends DefaultMaxMessagesRecvByteBufAllocator {
        Allocator() {
            super(64);
        }

        // Netty's signature still names the deprecated Handle; what is returned is an ExtendedHandle, as epoll needs
        @Override
        @SuppressWarnings("deprecation")
        public Handle newHandle() {
            return new MaxMessageHandle() {
                @Override
                public ByteBuf allocate(ByteBufAllocator alloc) {
                    return nextBuffer(alloc);
                }

                @Override
                public int guess() {
                    return CONTROL_READ_BYTES;
                }
            };
        }
    }
}
