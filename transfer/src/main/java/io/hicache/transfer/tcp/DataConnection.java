package io.hicache.transfer.tcp;

import io.hicache.transfer.frame.FrameHandler;
import io.hicache.transfer.frame.Frames;
import io.hicache.transfer.frame.NettyLoops;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;

/**
 * One data connection from this engine to a peer's TCP transport. Requests go out in order and their answers come
 * back in the same order, so what is outstanding is a FIFO. Read payloads land straight in the slice's local memory;
 * write payloads leave from it without a copy.
 *
 * <p>Thread-safe: {@link #send} may be called from any thread and hops to the event loop, which owns all other
 * state. When the connection ends, every outstanding slice goes to {@code orphans} (to be moved to another connection
 * or failed). The link that opened it closes it.
 */
final class DataConnection extends FrameHandler {
    private final String label;
    private final BiConsumer<DataConnection, Slice> onAnswer;
    private final OrphanSink orphans;
    private final ArrayDeque<SliceOut> outstanding = new ArrayDeque<>();
    private final AtomicLong bytesInFlight = new AtomicLong();
    private volatile long oldestSentNanos;
    private volatile Channel channel;
    private volatile String closeReason;

    /** Where a dead connection's slices go, with the reason it died. */
    @FunctionalInterface
    interface OrphanSink {
        void orphaned(List<Slice> slices, String reason);
    }

    private record SliceOut(Slice slice, long sentNanos) {
    }

    private DataConnection(String label, BiConsumer<DataConnection, Slice> onAnswer, OrphanSink orphans) {
        super(TcpFrames.MAGIC);
        this.label = label;
        this.onAnswer = onAnswer;
        this.orphans = orphans;
    }

    /**
     * Starts connecting to {@code host:port}; the future completes with the connection once it said hello, or
     * fails. {@code onAnswer} runs on the event loop after each answered slice, and with a null slice when the
     * connection closed.
     */
    static CompletableFuture<DataConnection> connect(EventLoopGroup group, String host, int port,
            long connectTimeoutMillis, String selfName, String label, BiConsumer<DataConnection, Slice> onAnswer,
            OrphanSink orphans) {
        DataConnection conn = new DataConnection(label, onAnswer, orphans);
        CompletableFuture<DataConnection> result = new CompletableFuture<>();
        Bootstrap b = new Bootstrap().group(group).channel(NettyLoops.socketChannel())
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.SO_RCVBUF, 4 << 20)
                .option(ChannelOption.SO_SNDBUF, 4 << 20)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(Integer.MAX_VALUE, connectTimeoutMillis))
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        conn.install(ch);
                        ch.pipeline().addLast(conn);
                    }
                });
        ChannelFuture f = b.connect(host, port);
        f.addListener(done -> {
            if (!done.isSuccess()) {
                result.completeExceptionally(done.cause());
                return;
            }
            conn.channel = f.channel();
            byte[] hello = selfName.getBytes(StandardCharsets.UTF_8);
            conn.channel.writeAndFlush(Unpooled.wrappedBuffer(conn.header(conn.channel.alloc(), TcpFrames.HELLO, 0, 0,
                    0, hello.length), Unpooled.wrappedBuffer(hello)));
            result.complete(conn);
        });
        return result;
    }

    /** Whether the connection is open. */
    boolean isOpen() {
        Channel c = channel;
        return c != null && c.isActive() && closeReason == null;
    }

    /** Bytes of slices sent and not yet answered. */
    long bytesInFlight() {
        return bytesInFlight.get();
    }

    /** When the oldest unanswered request was sent ({@link System#nanoTime()}), or 0 when none is. */
    long oldestSentNanos() {
        return oldestSentNanos;
    }

    /** Why it closed, or null. */
    String closeReason() {
        return closeReason;
    }

    /** Sends a slice's request (and, for a write, its bytes). */
    void send(Slice slice) {
        bytesInFlight.addAndGet(slice.local().byteSize());
        Channel c = channel;
        c.eventLoop().execute(() -> {
            if (!c.isActive()) {
                bytesInFlight.addAndGet(-slice.local().byteSize());
                orphans.orphaned(List.of(slice), reason("the connection closed"));
                return;
            }
            int length = (int) slice.local().byteSize();
            byte type = slice.op() == TransferOp.WRITE ? TcpFrames.WRITE : TcpFrames.READ;
            push(new SliceOut(slice, System.nanoTime()));
            c.write(header(c.alloc(), type, slice.region().id(), 0, slice.remoteOffset(), length));
            if (type == TcpFrames.WRITE) {
                c.write(Unpooled.wrappedBuffer(slice.local().asByteBuffer()));
            }
            c.flush();
        });
    }

    /** Closes the connection, recording why; outstanding requests are orphaned or failed. Idempotent. */
    void close(String reason) {
        if (closeReason == null) {
            closeReason = reason;
        }
        Channel c = channel;
        if (c != null) {
            c.close();
        }
    }

    private String reason(String fallback) {
        String r = closeReason;
        return label + ": " + (r == null ? fallback : r);
    }

    private void push(SliceOut out) {
        if (outstanding.isEmpty()) {
            oldestSentNanos = out.sentNanos();
        }
        outstanding.add(out);
    }

    private SliceOut pop() {
        SliceOut head = outstanding.poll();
        SliceOut next = outstanding.peek();
        oldestSentNanos = next == null ? 0 : next.sentNanos();
        return head;
    }

    @Override
    protected MemorySegment payloadTarget(Frames.Header h) {
        SliceOut head = outstanding.peek();
        if (h.type() == TcpFrames.READ_DATA && head != null && head.slice().local().byteSize() == h.length()) {
            return head.slice().local();
        }
        return null;
    }

    @Override
    protected void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte[] payload) {
        SliceOut head = pop();
        if (head == null) {
            throw new IllegalStateException("answer of type " + h.type() + " with nothing outstanding");
        }
        Slice slice = head.slice();
        bytesInFlight.addAndGet(-slice.local().byteSize());
        boolean expected = slice.op() == TransferOp.WRITE ? h.type() == TcpFrames.WRITE_ACK
                : h.type() == TcpFrames.READ_DATA;
        if (h.type() == TcpFrames.ERROR) {
            slice.done("peer refused: " + text(payload));
        } else if (!expected || payload != null) {
            throw new IllegalStateException("answer of type " + h.type() + " does not match the request");
        } else {
            slice.done(null);
        }
        onAnswer.accept(this, slice);
    }

    private static String text(byte[] payload) {
        return payload == null ? "" : new String(payload, StandardCharsets.UTF_8);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (closeReason == null) {
            closeReason = "the peer closed the connection";
        }
        List<Slice> slices = new ArrayList<>();
        for (SliceOut o = outstanding.poll(); o != null; o = outstanding.poll()) {
            bytesInFlight.addAndGet(-o.slice().local().byteSize());
            slices.add(o.slice());
        }
        oldestSentNanos = 0;
        if (!slices.isEmpty()) {
            orphans.orphaned(slices, reason("closed"));
        }
        onAnswer.accept(this, null);
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        close(String.valueOf(cause.getMessage() == null ? cause : cause.getMessage()));
    }

    @Override
    public String toString() {
        return label;
    }
}
