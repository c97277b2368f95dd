package io.hicache.transfer.tcp;

import io.hicache.transfer.TransferOp;
import io.hicache.transfer.spi.Slice;
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
 * One connection from this engine to a peer's listener. Requests go out in order and their answers come back in
 * the same order, so what is outstanding is a FIFO. Read payloads land straight in the slice's local memory; write
 * payloads leave from it without a copy.
 *
 * <p>Thread-safe: {@link #send} and {@link #request} may be called from any thread and hop to the event loop, which
 * owns all other state. When the connection ends, every outstanding slice goes to {@code orphans} (to be moved to
 * another connection or failed) and every outstanding control request fails.
 */
public final class ClientConnection extends FrameHandler {
    private final String label;
    private final BiConsumer<ClientConnection, Slice> onAnswer;
    private final OrphanSink orphans;
    private final ArrayDeque<Object> outstanding = new ArrayDeque<>();
    private final AtomicLong bytesInFlight = new AtomicLong();
    private volatile long oldestSentNanos;
    private volatile Channel channel;
    private volatile String closeReason;

    /** Where a dead connection's slices go, with the reason it died. */
    @FunctionalInterface
    public interface OrphanSink {
        void orphaned(List<Slice> slices, String reason);
    }

    private record SliceOut(Slice slice, long sentNanos) {
    }

    private record ControlOut(byte type, CompletableFuture<byte[]> answer, long sentNanos) {
    }

    private ClientConnection(String label, BiConsumer<ClientConnection, Slice> onAnswer, OrphanSink orphans) {
        this.label = label;
        this.onAnswer = onAnswer;
        this.orphans = orphans;
    }

    /**
     * Starts connecting to {@code host:port}; the future completes with the connection once it said hello, or
     * fails. {@code onAnswer} runs on the event loop after each answered slice, and with a null slice when the
     * connection closed.
     */
    public static CompletableFuture<ClientConnection> connect(EventLoopGroup group, String host, int port,
            long connectTimeoutMillis, String selfName, String label, BiConsumer<ClientConnection, Slice> onAnswer,
            OrphanSink orphans) {
        ClientConnection conn = new ClientConnection(label, onAnswer, orphans);
        CompletableFuture<ClientConnection> result = new CompletableFuture<>();
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
            conn.channel.write(Frames.header(conn.channel.alloc(), Frames.HELLO, 0, 0, 0, hello.length));
            conn.channel.writeAndFlush(Unpooled.wrappedBuffer(hello));
            result.complete(conn);
        });
        return result;
    }

    /** Whether the connection is open. */
    public boolean isOpen() {
        Channel c = channel;
        return c != null && c.isActive() && closeReason == null;
    }

    /** Bytes of slices sent and not yet answered. */
    public long bytesInFlight() {
        return bytesInFlight.get();
    }

    /** When the oldest unanswered request was sent ({@link System#nanoTime()}), or 0 when none is. */
    public long oldestSentNanos() {
        return oldestSentNanos;
    }

    /** Why it closed, or null. */
    public String closeReason() {
        return closeReason;
    }

    /** Sends a slice's request (and, for a write, its bytes). */
    public void send(Slice slice) {
        bytesInFlight.addAndGet(slice.local().byteSize());
        Channel c = channel;
        c.eventLoop().execute(() -> {
            if (!c.isActive()) {
                bytesInFlight.addAndGet(-slice.local().byteSize());
                orphans.orphaned(List.of(slice), reason("the connection closed"));
                return;
            }
            int length = (int) slice.local().byteSize();
            byte type = slice.op() == TransferOp.WRITE ? Frames.WRITE : Frames.READ;
            push(new SliceOut(slice, System.nanoTime()));
            c.write(Frames.header(c.alloc(), type, slice.region().id(), 0, slice.remoteOffset(), length));
            if (type == Frames.WRITE) {
                c.write(Unpooled.wrappedBuffer(slice.local().asByteBuffer()));
            }
            c.flush();
        });
    }

    /** Sends a control request (describe, ping) and returns its answer's payload. */
    public CompletableFuture<byte[]> request(byte type) {
        CompletableFuture<byte[]> answer = new CompletableFuture<>();
        Channel c = channel;
        c.eventLoop().execute(() -> {
            if (!c.isActive()) {
                answer.completeExceptionally(new IllegalStateException(reason("the connection closed")));
                return;
            }
            push(new ControlOut(type, answer, System.nanoTime()));
            c.writeAndFlush(Frames.header(c.alloc(), type, 0, 0, 0, 0));
        });
        return answer;
    }

    /** Sends a message that the peer's engine delivers to its listener; no answer. */
    public void message(byte[] payload) {
        Channel c = channel;
        // one write, so messages from several threads never interleave their header and payload
        c.writeAndFlush(Unpooled.wrappedBuffer(Frames.header(c.alloc(), Frames.MESSAGE, 0, 0, 0, payload.length),
                Unpooled.wrappedBuffer(payload)));
    }

    /** Closes the connection, recording why; outstanding requests are orphaned or failed. Idempotent. */
    public void close(String reason) {
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

    private void push(Object out) {
        if (outstanding.isEmpty()) {
            oldestSentNanos = out instanceof SliceOut s ? s.sentNanos() : ((ControlOut) out).sentNanos();
        }
        outstanding.add(out);
    }

    private Object pop() {
        Object head = outstanding.poll();
        Object next = outstanding.peek();
        oldestSentNanos = next == null ? 0 : next instanceof SliceOut s ? s.sentNanos() : ((ControlOut) next).sentNanos();
        return head;
    }

    @Override
    MemorySegment payloadTarget(Frames.Header h) {
        if (h.type() == Frames.READ_DATA && outstanding.peek() instanceof SliceOut s
                && s.slice().local().byteSize() == h.length()) {
            return s.slice().local();
        }
        return null;
    }

    @Override
    void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte[] payload) {
        Object head = pop();
        if (head == null) {
            throw new IllegalStateException("answer of type " + h.type() + " with nothing outstanding");
        }
        if (head instanceof ControlOut c) {
            if (h.type() == Frames.ERROR) {
                c.answer().completeExceptionally(new IllegalStateException(text(payload)));
            } else {
                c.answer().complete(payload == null ? new byte[0] : payload);
            }
            return;
        }
        Slice slice = ((SliceOut) head).slice();
        bytesInFlight.addAndGet(-slice.local().byteSize());
        boolean expected = slice.op() == TransferOp.WRITE ? h.type() == Frames.WRITE_ACK : h.type() == Frames.READ_DATA;
        if (h.type() == Frames.ERROR) {
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
        for (Object o = outstanding.poll(); o != null; o = outstanding.poll()) {
            if (o instanceof SliceOut s) {
                bytesInFlight.addAndGet(-s.slice().local().byteSize());
                slices.add(s.slice());
            } else {
                ((ControlOut) o).answer().completeExceptionally(new IllegalStateException(reason("closed")));
            }
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
