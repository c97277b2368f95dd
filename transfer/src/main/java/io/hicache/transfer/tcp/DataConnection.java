package io.hicache.transfer.tcp;

import io.hicache.transfer.frame.FrameClient;
import io.hicache.transfer.frame.Frames;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.EventLoopGroup;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import org.jspecify.annotations.Nullable;

/**
 * One data connection from this engine to a peer's TCP transport. Requests go out in order and their answers come
 * back in the same order, so what is outstanding is a FIFO. Read payloads land straight in the slice's local memory;
 * write payloads leave from it without a copy.
 *
 * <p>Thread-safe: {@link #send} may be called from any thread and hops to the event loop, which owns all other
 * state. When the connection ends, every outstanding slice goes to {@code orphans} (to be moved to another connection
 * or failed). The link that opened it closes it.
 */
final class DataConnection extends FrameClient {
    private final BiConsumer<DataConnection, Slice> onAnswer;
    private final OrphanSink orphans;
    private static final int ACK_READ_AHEAD_MAX_BYTES = 64 << 10;

    private final ArrayDeque<SliceOut> outstanding = new ArrayDeque<>();
    /** Outstanding slices that are reads, whose answers carry payloads; event loop only. */
    private int readsOutstanding;

    private final AtomicLong bytesInFlight = new AtomicLong();
    private final Queue<Slice> toSend = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private volatile long oldestSentNanos;

    /** Where a dead connection's slices go, with the reason it died. */
    @FunctionalInterface
    interface OrphanSink {
        void orphaned(List<Slice> slices, String reason);
    }

    private record SliceOut(Slice slice, long sentNanos) {}

    private DataConnection(String label, BiConsumer<DataConnection, Slice> onAnswer, OrphanSink orphans) {
        super(TcpFrames.MAGIC, label);
        this.onAnswer = onAnswer;
        this.orphans = orphans;
    }

    /**
     * Starts connecting to {@code host:port}; the future completes with the connection once it said hello, or
     * fails. {@code onAnswer} runs on the event loop after each answered slice, and with a null slice when the
     * connection closed.
     */
    static CompletableFuture<DataConnection> connect(
            EventLoopGroup group,
            String host,
            int port,
            long connectTimeoutMillis,
            String selfName,
            String label,
            BiConsumer<DataConnection, Slice> onAnswer,
            OrphanSink orphans) {
        return connect(
                new DataConnection(label, onAnswer, orphans),
                group,
                host,
                port,
                connectTimeoutMillis,
                TcpTransport.SOCKET_BUFFER_BYTES,
                selfName);
    }

    /** Bytes of slices sent and not yet answered. */
    long bytesInFlight() {
        return bytesInFlight.get();
    }

    /** When the oldest unanswered request was sent ({@link System#nanoTime()}), or 0 when none is. */
    long oldestSentNanos() {
        return oldestSentNanos;
    }

    /**
     * Sends a slice's request (and, for a write, its bytes). Slices sent from any thread queue here and one task on
     * the event loop writes all that queued and flushes once, so a burst of slices costs one system call rather than
     * one each.
     */
    void send(Slice slice) {
        bytesInFlight.addAndGet(slice.local().byteSize());
        toSend.add(slice);
        if (drainScheduled.compareAndSet(false, true)) {
            channel().eventLoop().execute(this::drain);
        }
    }

    private void drain() {
        drainScheduled.set(false);
        Channel c = channel();
        boolean wrote = false;
        for (Slice slice = toSend.poll(); slice != null; slice = toSend.poll()) {
            if (!c.isActive()) {
                bytesInFlight.addAndGet(-slice.local().byteSize());
                orphans.orphaned(List.of(slice), reason("the connection closed"));
                continue;
            }
            int length = (int) slice.local().byteSize();
            byte type = slice.op() == TransferOp.WRITE ? TcpFrames.WRITE : TcpFrames.READ;
            push(new SliceOut(slice, System.nanoTime()));
            c.write(header(c.alloc(), type, slice.region().id(), 0, slice.remoteOffset(), length));
            if (type == TcpFrames.WRITE) {
                c.write(Unpooled.wrappedBuffer(slice.local().asByteBuffer()));
            }
            wrote = true;
        }
        if (wrote) {
            c.flush();
        }
    }

    private String reason(String fallback) {
        return label() + ": " + closeReasonOr(fallback);
    }

    private void push(SliceOut out) {
        if (outstanding.isEmpty()) {
            oldestSentNanos = out.sentNanos();
        }
        outstanding.add(out);
        if (out.slice().op() != TransferOp.WRITE) {
            readsOutstanding++;
        }
    }

    private @Nullable SliceOut pop() {
        SliceOut head = outstanding.poll();
        if (head != null && head.slice().op() != TransferOp.WRITE) {
            readsOutstanding--;
        }
        SliceOut next = outstanding.peek();
        oldestSentNanos = next == null ? 0 : next.sentNanos();
        return head;
    }

    /** While only writes are outstanding, every answer ahead is a bare acknowledgement: read them all at once. */
    @Override
    protected int headerReadAheadBytes() {
        return readsOutstanding == 0
                ? (int) Math.min(ACK_READ_AHEAD_MAX_BYTES, (long) outstanding.size() * Frames.HEADER_BYTES)
                : 0;
    }

    @Override
    protected @Nullable MemorySegment payloadTarget(Frames.Header h) {
        SliceOut head = outstanding.peek();
        if (h.type() == TcpFrames.READ_DATA
                && head != null
                && head.slice().local().byteSize() == h.length()) {
            return head.slice().local();
        }
        return null;
    }

    @Override
    protected void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        SliceOut head = pop();
        if (head == null) {
            throw new IllegalStateException("answer of type " + h.type() + " with nothing outstanding");
        }
        Slice slice = head.slice();
        bytesInFlight.addAndGet(-slice.local().byteSize());
        boolean expected =
                slice.op() == TransferOp.WRITE ? h.type() == TcpFrames.WRITE_ACK : h.type() == TcpFrames.READ_DATA;
        if (h.type() == Frames.ERROR) {
            slice.done("peer refused: " + text(payload));
        } else if (!expected || payload != null) {
            throw new IllegalStateException("answer of type " + h.type() + " does not match the request");
        } else {
            slice.done(null);
        }
        onAnswer.accept(this, slice);
    }

    private static String text(byte @Nullable [] payload) {
        return payload == null ? "" : new String(payload, StandardCharsets.UTF_8);
    }

    /** Outstanding slices are orphaned (with why), then {@code onAnswer} hears of the close. */
    @Override
    protected void closed(String reason) {
        List<Slice> slices = new ArrayList<>();
        readsOutstanding = 0;
        for (SliceOut o = outstanding.poll(); o != null; o = outstanding.poll()) {
            bytesInFlight.addAndGet(-o.slice().local().byteSize());
            slices.add(o.slice());
        }
        oldestSentNanos = 0;
        if (!slices.isEmpty()) {
            orphans.orphaned(slices, label() + ": " + reason);
        }
        onAnswer.accept(this, null);
    }
}
