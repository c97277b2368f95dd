package io.hicache.transfer.control;

import io.hicache.transfer.frame.FrameClient;
import io.hicache.transfer.frame.Frames;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.EventLoopGroup;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * One control connection from this engine to a peer's control listener: it fetches the peer's descriptor, carries
 * messages to it, and runs the heartbeat that decides whether the peer is alive. Requests go out in order and their
 * answers come back in the same order, so what is outstanding is a FIFO.
 *
 * <p>Thread-safe: every method may be called from any thread; the FIFO is touched on the event loop only. The engine
 * object that opened it (a remote segment) closes it.
 */
public final class ControlClient extends FrameClient {
    /** Pings that may go unanswered in a row before the peer is declared dead. */
    private static final int MISSED_PINGS = 3;

    private final ArrayDeque<CompletableFuture<byte[]>> outstanding = new ArrayDeque<>();
    private final AtomicBoolean deathReported = new AtomicBoolean();
    /** Set by {@link #watch}; null before. */
    private volatile @Nullable Consumer<String> onDeath;

    private volatile @Nullable ScheduledFuture<?> heartbeat;
    private volatile long lastAnswerNanos;

    private ControlClient(String label) {
        super(ControlFrames.MAGIC, label);
    }

    /** Starts connecting; the future completes with the connection once it said hello as {@code selfName}. */
    static CompletableFuture<ControlClient> connect(
            EventLoopGroup group, String host, int port, long connectTimeoutMillis, String selfName, String label) {
        // control traffic is small: the system's socket buffers do
        return connect(new ControlClient(label), group, host, port, connectTimeoutMillis, 0, selfName);
    }

    /** Fetches the peer's encoded segment descriptor. */
    public CompletableFuture<byte[]> describe() {
        return request(ControlFrames.DESCRIBE);
    }

    /** Sends a message that the peer's engine delivers to its listener; no answer. */
    public void message(byte[] payload) {
        Channel c = channel();
        // one write, so messages from several threads never interleave their header and payload
        c.writeAndFlush(Unpooled.wrappedBuffer(
                header(c.alloc(), ControlFrames.MESSAGE, 0, 0, 0, payload.length), Unpooled.wrappedBuffer(payload)));
    }

    /**
     * Starts the heartbeat: a ping every {@code everyMillis} on {@code timer}. {@code onDeath} runs once, with the
     * reason, when the connection closes or {@value #MISSED_PINGS} pings in a row go unanswered (at once if it is
     * already closed). Call once.
     */
    public void watch(ScheduledExecutorService timer, long everyMillis, Consumer<String> onDeath) {
        this.onDeath = onDeath;
        this.lastAnswerNanos = System.nanoTime();
        this.heartbeat =
                timer.scheduleWithFixedDelay(() -> beat(everyMillis), everyMillis, everyMillis, TimeUnit.MILLISECONDS);
        if (!isOpen()) {
            reportDeath("control connection closed (" + closeReasonOr(PEER_CLOSED) + ")");
        }
    }

    private void beat(long everyMillis) {
        if (deathReported.get()) {
            return;
        }
        if (!isOpen()) {
            reportDeath("control connection closed (" + closeReasonOr(PEER_CLOSED) + ")");
            return;
        }
        long silentMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastAnswerNanos);
        if (silentMillis > MISSED_PINGS * everyMillis) {
            reportDeath("no heartbeat answer for " + silentMillis + " ms");
            return;
        }
        request(ControlFrames.PING).whenComplete((ok, error) -> {
            if (error == null) {
                lastAnswerNanos = System.nanoTime();
            }
        });
    }

    /** Runs the death callback once, if {@link #watch} set one; before that, {@link #watch} reports it itself. */
    private void reportDeath(String reason) {
        Consumer<String> callback = onDeath;
        if (callback == null || !deathReported.compareAndSet(false, true)) {
            return;
        }
        ScheduledFuture<?> beat = heartbeat;
        if (beat != null) {
            beat.cancel(false);
        }
        callback.accept(reason);
    }

    /** Stops the heartbeat as the connection closes; outstanding requests fail once the channel is down. */
    @Override
    protected void closing() {
        ScheduledFuture<?> beat = heartbeat;
        if (beat != null) {
            beat.cancel(false);
        }
    }

    private CompletableFuture<byte[]> request(byte type) {
        CompletableFuture<byte[]> answer = new CompletableFuture<>();
        Channel c = channel();
        c.eventLoop().execute(() -> {
            if (!c.isActive()) {
                answer.completeExceptionally(
                        new IllegalStateException(label() + ": " + closeReasonOr("the connection closed")));
                return;
            }
            outstanding.add(answer);
            c.writeAndFlush(header(c.alloc(), type, 0, 0, 0, 0));
        });
        return answer;
    }

    @Override
    protected @Nullable MemorySegment payloadTarget(Frames.Header h) {
        return null;
    }

    @Override
    protected void onFrame(ChannelHandlerContext ctx, Frames.Header h, byte @Nullable [] payload) {
        CompletableFuture<byte[]> answer = outstanding.poll();
        if (answer == null) {
            throw new IllegalStateException("control answer of type " + h.type() + " with nothing outstanding");
        }
        if (h.type() == Frames.ERROR) {
            answer.completeExceptionally(
                    new IllegalStateException(payload == null ? "" : new String(payload, StandardCharsets.UTF_8)));
        } else {
            answer.complete(payload == null ? new byte[0] : payload);
        }
    }

    @Override
    protected void closed(String reason) {
        for (CompletableFuture<byte[]> o = outstanding.poll(); o != null; o = outstanding.poll()) {
            o.completeExceptionally(new IllegalStateException(label() + ": closed (" + reason + ")"));
        }
        reportDeath("control connection closed (" + reason + ")");
    }
}
