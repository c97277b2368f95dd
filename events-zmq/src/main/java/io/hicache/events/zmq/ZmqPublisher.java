package io.hicache.events.zmq;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.KvEventBatch;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.KvEventsConfig;
import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * SGLang's {@code ZmqEventPublisher}, in Java. Each batch goes out on a PUB socket as three frames: the topic (UTF-8,
 * empty by default), the batch's sequence number (8 bytes, big-endian, from 0, one per batch) and the msgpack payload
 * ({@link BatchEncoder}). The last {@code buffer_steps} batches are kept; with a {@code replay_endpoint}, a ROUTER
 * socket answers a subscriber that sends a start sequence number (8 bytes, big-endian) with every kept batch at or
 * after it, as {@code (seq, payload)}, then the end marker {@code (-1 as 8 bytes, empty)}.
 *
 * <p>The PUB socket binds its endpoint when it has a wildcard host ({@code *}, {@code ::}, {@code 0.0.0.0}) or is
 * {@code inproc://}, and connects otherwise ({@code ipc://} is refused: JeroMQ makes no socket file for it); the ROUTER socket always binds. A non-zero
 * {@code attn_dp_rank} raises both ports by the rank (SGLang's rule) and is stamped on every batch.
 *
 * <p>Threads: the sockets belong to one thread, {@code hicache-kv-events-zmq}, which sends batches and answers replay
 * requests; {@link #publish} encodes on the caller's thread and hands the payload over (waiting while 64 payloads
 * wait: the caller is the {@link io.hicache.core.events.KvEventSink}'s thread, whose own queue then drops the oldest
 * events). A PUB socket drops messages for a subscriber past the high-water mark rather than wait. The thread never
 * dies on a failed send or replay: it counts, logs (rate-limited) and goes on.
 *
 * <p>Thread-safe. The opener owns it; {@link #close()} sends what was handed over (for up to a second), then closes
 * the sockets, letting queued messages out for a quarter of a second.
 */
public final class ZmqPublisher implements KvEventPublisher {
    private static final System.Logger LOG = System.getLogger(ZmqPublisher.class.getName());
    /** The replay's end marker: -1 as 8 bytes, big-endian. */
    static final byte[] END_OF_REPLAY = seqBytes(-1);

    private static final byte[] EMPTY = new byte[0];
    private static final int HANDOFF_BATCHES = 64;
    private static final long POLL_MILLIS = 10;
    private static final long START_WAIT_SECONDS = 10;
    private static final long CLOSE_WAIT_MILLIS = 2_000;
    private static final int LINGER_MILLIS = 250;

    private record Kept(long seq, byte[] payload) {}

    private final KvEventsConfig config;
    private final String endpoint;
    /** SGLang's rule, decided on the endpoint as given (a bind_host makes a wildcard a definite address). */
    private final boolean bindsPub;

    private final Optional<String> replayEndpoint;
    private final byte[] topic;
    private final BlockingQueue<byte[]> handoff = new ArrayBlockingQueue<>(HANDOFF_BATCHES);
    private final CompletableFuture<Void> started = new CompletableFuture<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder sentBatches = new LongAdder();
    private final LongAdder replays = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final RateLimitedLog failureLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));
    private final Thread thread;
    private volatile boolean stopping;
    /** Set by the sending thread before {@link #open} returns. */
    private volatile @Nullable String boundEndpoint;
    /** Null without replay. */
    private volatile @Nullable String boundReplayEndpoint;

    private ZmqPublisher(KvEventsConfig config) {
        this.config = config;
        Endpoints.refuseIpc(config.endpoint());
        config.replayEndpoint().ifPresent(Endpoints::refuseIpc);
        String pub = Endpoints.forRank(config.endpoint(), config.attnDpRank());
        this.bindsPub = Endpoints.binds(pub);
        this.endpoint = bindsPub ? Endpoints.onHost(pub, config.bindHost()) : pub;
        this.replayEndpoint = config.replayEndpoint()
                .map(e -> Endpoints.onHost(Endpoints.forRank(e, config.attnDpRank()), config.bindHost()));
        this.topic = config.topic().getBytes(StandardCharsets.UTF_8);
        this.thread = Threads.start("kv-events-zmq", this::run);
    }

    /**
     * Opens the sockets {@code config} describes and starts the sending thread.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} for an endpoint the data-parallel rank cannot shift,
     *     {@link ErrorCode#TRANSFER_UNAVAILABLE} when an endpoint cannot be bound or connected
     */
    public static ZmqPublisher open(KvEventsConfig config) {
        ZmqPublisher p;
        try {
            p = new ZmqPublisher(config);
        } catch (IllegalArgumentException e) {
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, "kv events: " + e.getMessage(), e);
        }
        try {
            p.started.get(START_WAIT_SECONDS, TimeUnit.SECONDS);
            return p;
        } catch (ExecutionException | TimeoutException e) {
            p.close();
            Throwable why = e instanceof ExecutionException ? e.getCause() : e;
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    "kv events: cannot open the ZeroMQ sockets (PUB " + p.endpoint
                            + p.replayEndpoint.map(r -> ", ROUTER " + r).orElse("") + "): " + why,
                    why);
        } catch (InterruptedException e) {
            p.close();
            Thread.currentThread().interrupt();
            throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "kv events: interrupted opening the sockets", e);
        }
    }

    /** The PUB socket's address: as bound (a wildcard port resolved), or as connected. */
    public String publishEndpoint() {
        return Checks.checkNotNull(boundEndpoint, "the PUB endpoint (set before open returns)");
    }

    /** The ROUTER socket's bound address, if replay is on. */
    public Optional<String> replayEndpoint() {
        return Optional.ofNullable(boundReplayEndpoint);
    }

    /** Batches sent on the PUB socket so far; the next one's sequence number. */
    public long sentBatches() {
        return sentBatches.sum();
    }

    /** Replay requests answered so far. */
    public long replaysAnswered() {
        return replays.sum();
    }

    /** Sends and replays that failed (logged, rate-limited). */
    public long failures() {
        return failures.sum();
    }

    /**
     * Encodes {@code batch} and hands it to the sending thread, waiting while 64 batches wait to be sent.
     *
     * @throws IllegalStateException when the publisher is closed (as SGLang's raises)
     */
    @Override
    public void publish(KvEventBatch batch) {
        byte[] payload = BatchEncoder.encode(batch, config.attnDpRank());
        try {
            while (!handoff.offer(payload, 100, TimeUnit.MILLISECONDS)) {
                checkOpen();
            }
            checkOpen();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted handing a batch to the ZeroMQ thread", e);
        }
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new IllegalStateException("the ZeroMQ KV event publisher is closed");
        }
    }

    private void run() {
        try (ZContext ctx = new ZContext()) {
            ZMQ.Socket pub;
            ZMQ.Socket router = null;
            try {
                pub = ctx.createSocket(SocketType.PUB);
                pub.setSndHWM(config.sendHighWaterMarkMessages());
                pub.setLinger(LINGER_MILLIS);
                if (bindsPub) {
                    pub.bind(endpoint);
                    boundEndpoint = pub.getLastEndpoint();
                } else {
                    pub.connect(endpoint);
                    boundEndpoint = endpoint;
                }
                if (replayEndpoint.isPresent()) {
                    router = ctx.createSocket(SocketType.ROUTER);
                    // a whole replay fits in one subscriber's pipe
                    router.setSndHWM((int) Math.min(Integer.MAX_VALUE, config.replayBufferBatches() + 16L));
                    router.setLinger(0);
                    router.bind(replayEndpoint.get());
                    boundReplayEndpoint = router.getLastEndpoint();
                }
            } catch (RuntimeException e) {
                started.completeExceptionally(e);
                return;
            }
            ZMQ.Poller replayPoller = null;
            if (router != null) {
                replayPoller = ctx.createPoller(1);
                replayPoller.register(router, ZMQ.Poller.POLLIN);
            }
            started.complete(null);
            loop(pub, router, replayPoller);
        } catch (RuntimeException e) {
            started.completeExceptionally(e);
            LOG.log(Level.WARNING, "kv events: closing the ZeroMQ sockets failed", e);
        }
    }

    private void loop(ZMQ.Socket pub, ZMQ.@Nullable Socket router, ZMQ.@Nullable Poller replayPoller) {
        ArrayDeque<Kept> kept = new ArrayDeque<>();
        long seq = 0;
        while (true) {
            byte[] payload;
            try {
                if (router != null) {
                    answerReplays(router, Checks.checkNotNull(replayPoller, "the router's poller"), kept);
                }
                payload = handoff.poll(POLL_MILLIS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                payload = null; // close() interrupts a thread that did not stop in time
            } catch (RuntimeException e) {
                fail("replay", e);
                continue;
            }
            if (payload == null) {
                if (stopping || Thread.currentThread().isInterrupted()) {
                    return;
                }
                continue;
            }
            try {
                pub.sendMore(topic);
                pub.sendMore(seqBytes(seq));
                pub.send(payload);
                if (config.replayBufferBatches() > 0) {
                    if (kept.size() == config.replayBufferBatches()) {
                        kept.pollFirst();
                    }
                    kept.addLast(new Kept(seq, payload));
                }
                seq++;
                sentBatches.increment();
            } catch (RuntimeException e) {
                fail("send", e);
            }
        }
    }

    /** Answers every replay request waiting, without blocking. */
    private void answerReplays(ZMQ.Socket router, ZMQ.Poller poller, ArrayDeque<Kept> kept) {
        while (poller.poll(0) > 0 && poller.pollin(0)) {
            ZMsg request = ZMsg.recvMsg(router);
            try {
                if (request.size() != 3) {
                    failureLog.log("kv events: a replay request of " + request.size() + " frames, not 3 (identity, "
                            + "empty, start sequence): ignored");
                    continue;
                }
                byte[] client = request.pop().getData();
                request.pop();
                long start = unsignedBigEndian(request.pop().getData());
                for (Kept k : kept) {
                    if (Long.compareUnsigned(k.seq, start) >= 0) {
                        router.sendMore(client);
                        router.sendMore(EMPTY);
                        router.sendMore(seqBytes(k.seq));
                        router.send(k.payload);
                    }
                }
                router.sendMore(client);
                router.sendMore(EMPTY);
                router.sendMore(END_OF_REPLAY);
                router.send(EMPTY);
                replays.increment();
            } finally {
                request.destroy();
            }
        }
    }

    private void fail(String what, RuntimeException e) {
        failures.increment();
        failureLog.log("kv events: a ZeroMQ " + what + " failed (" + e + "); going on");
    }

    static byte[] seqBytes(long seq) {
        return ByteBuffer.allocate(Long.BYTES).putLong(seq).array();
    }

    /** SGLang reads the start as {@code int.from_bytes(b, "big")}: any length, unsigned. */
    private static long unsignedBigEndian(byte[] bytes) {
        long v = 0;
        for (byte b : bytes) {
            v = (v << 8) | (b & 0xff);
        }
        return v;
    }

    /** Sends what was handed over (for up to a second), then closes the sockets. A second call does nothing. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        stopping = true;
        try {
            thread.join(CLOSE_WAIT_MILLIS);
            if (thread.isAlive()) {
                thread.interrupt();
                thread.join(CLOSE_WAIT_MILLIS);
                LOG.log(
                        Level.WARNING,
                        "kv events: the ZeroMQ thread did not stop within " + CLOSE_WAIT_MILLIS + " ms; "
                                + handoff.size() + " batches were not sent");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
