package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.util.Checks;
import io.hicache.storage.remote.protocol.AdminRequest;
import io.hicache.storage.remote.protocol.FrameHeader;
import io.hicache.storage.remote.protocol.Hello;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.ReadRequest;
import io.hicache.storage.remote.protocol.Request;
import io.hicache.storage.remote.protocol.RequestDecoder;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WriteRequest;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.TooLongFrameException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * One client connection's requests, once its {@link HandshakeHandler} accepted the HELLO: each frame is decoded once
 * into a typed {@link Request} ({@link RequestDecoder}) and handed to the handler of its family ({@link ReadHandler},
 * {@link WriteHandler}, {@link AdminHandler}), whose {@link Work} runs on the event loop if it can finish there, else
 * on the worker threads; every answer carries its request's id, so that a client can pipeline. Reading from the
 * connection pauses while it has {@code server.max-in-flight-bytes} in progress: requests on the workers, or answers
 * the client has not taken yet.
 *
 * <p>Writes ({@link Request#isWrite}) take effect in the order the client sent them: a request that must not overtake
 * an earlier one still on a worker (a write behind anything, anything behind a write) is held back, its bytes counted
 * as in flight, and started when that one finishes. Reads overlap one another.
 *
 * <p>Admin operations (FLUSH, STORE DETACH and ATTACH, CLEAR_ALL) run only on a connection with admin permission
 * ({@link Session#admin}); elsewhere they are ERROR AUTH and the connection stays.
 *
 * <p>A malformed request gets an ERROR answer and the connection stays; a frame over the size limit or the daemon's
 * partial-frame budget gets an ERROR answer and the connection is closed.
 *
 * <p>One instance per connection; its state is touched by the connection's event loop only.
 */
final class ServerHandler extends ChannelInboundHandlerAdapter {
    private static final System.Logger LOG = System.getLogger(ServerHandler.class.getName());
    private static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(30);

    /** A request held back behind an earlier one it must not overtake (see {@link #mayStart}). */
    private record Held(Call call, Work work, ByteBuf frame, boolean write) {}

    private final HiCacheServer server;
    private final Responder out;
    /** The connection's HELLO's outcome, and the decoder it implies; null until the handshake is accepted. */
    private @Nullable Session session;

    private @Nullable RequestDecoder decoder;
    private boolean counted;
    private long inFlightBytes;
    private boolean paused;
    /** Requests of this connection on the workers, reads and writes. */
    private int runningReads;

    private int runningWrites;
    private final ArrayDeque<Held> held = new ArrayDeque<>();

    ServerHandler(HiCacheServer server, Responder out) {
        this.server = server;
        this.out = out;
    }

    /** The handshake was accepted: requests may come. Returns the connection's request decoder. */
    RequestDecoder accepted(Session session) {
        this.session = session;
        RequestDecoder d = new RequestDecoder(
                session.version(),
                server.config.maxFrameBytes(),
                new NamespaceCache(session.version(), session.access())::read);
        this.decoder = d;
        return d;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        counted = true;
        if (server.metrics.connections.incrementAndGet() > server.config.maxConnections()) {
            server.metrics.connectionsRefused.inc();
            out.failAndClose(
                    0, Wire.E_BUSY, "the daemon is at its connection limit (" + server.config.maxConnections() + ")");
            return;
        }
        ctx.fireChannelActive();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (counted) {
            server.metrics.connections.decrementAndGet();
        }
        server.leases.releaseAll(ctx.channel());
        for (Held h; (h = held.poll()) != null; ) {
            h.frame().release(); // nobody is left to answer
            server.inFlight.decrementAndGet();
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf frame = msg instanceof PutLander.LandedPut landed ? landed.frame() : (ByteBuf) msg;
        FrameHeader header = out.receive(frame);
        if (header == null) {
            return;
        }
        int op = header.op();
        // The handshake handler, before this one, passes no frame on before it has accepted a HELLO.
        Session session = Checks.checkNotNull(this.session, "the session (a request comes after the handshake)");
        RequestDecoder decoder = Checks.checkNotNull(this.decoder, "the decoder (set with the session)");
        Call call = new Call(
                out,
                op,
                header.requestId(),
                Deadline.after(
                        header.timeoutMillis() > 0 ? Duration.ofMillis(header.timeoutMillis()) : DEFAULT_TIMEOUT),
                session.checksum());
        Refusal refusal = refusal(op, frame, session, decoder);
        if (refusal != null) {
            frame.release();
            call.fail(refusal.code(), refusal.message());
            return;
        }
        Request request;
        try {
            request = decoder.decode(header, frame);
        } catch (ProtocolException e) {
            frame.release();
            call.fail(e.code(), e.getMessage());
            return;
        } catch (IllegalArgumentException e) { // a record's own check the wire format lets through
            frame.release();
            call.fail(Wire.E_MALFORMED, "bad request: " + e.getMessage());
            return;
        }
        Work work = switch (request) {
            case ReadRequest r -> server.readHandler.work(call, r);
            case WriteRequest w ->
                server.writeHandler.work(call, w, frame instanceof PutLander.LandedFrame landed ? landed : null);
            case AdminRequest a -> server.adminHandler.work(call, a);
            case Hello h -> throw new IllegalStateException("a HELLO is refused before it is decoded");
        };
        if (!mayStart(request.isWrite())) {
            started(ctx, frame.capacity());
            held.add(new Held(call, work, frame, request.isWrite()));
            return;
        }
        run(ctx, call, work, frame, request.isWrite(), false);
    }

    /** Why a request is refused before its payload is read: the ERROR code and message it is answered with. */
    private record Refusal(short code, String message) {}

    /**
     * Why a request is refused before its payload is read, or null if it is not: a second HELLO (MALFORMED); any
     * request but STATS and HEALTH during a shutdown (SHUTTING_DOWN); an admin operation on a connection without admin
     * permission (AUTH), whatever its payload; an op the connection's version does not define (UNKNOWN_OP).
     */
    private @Nullable Refusal refusal(int op, ByteBuf payload, Session session, RequestDecoder decoder) {
        if (op == Wire.HELLO) {
            return new Refusal(Wire.E_MALFORMED, "HELLO was already accepted on this connection");
        }
        if (server.shuttingDown() && op != Wire.HEALTH && op != Wire.STATS) {
            return new Refusal(Wire.E_SHUTTING_DOWN, "the daemon is shutting down");
        }
        if (!session.admin() && RequestDecoder.isAdminOperation(op, payload)) {
            // FLUSH, STORE DETACH and ATTACH, and CLEAR_ALL are the operator's. (STORE SHOW only names the store;
            // CLEAR clears one namespace, a client's own.)
            return new Refusal(
                    Wire.E_AUTH,
                    Wire.opName(op) + " is an admin operation: "
                            + (server.config.adminToken().isEmpty()
                                    ? "without server.admin-token the daemon accepts admin operations only from loopback "
                                            + "peers, and this connection comes from "
                                            + out.channel().remoteAddress()
                                    : "this connection's HELLO did not carry server.admin-token"));
        }
        if (!session.sameHost() && (op == Wire.LEASE || op == Wire.RESERVE || op == Wire.COMMIT)) {
            // A lease or a reservation hands out places in the slab file, which holds every namespace's pages.
            return new Refusal(
                    Wire.E_AUTH,
                    Wire.opName(op) + " is for same-host clients that are no tenant (a loopback peer); GET and PUT "
                            + "serve this connection");
        }
        if (!decoder.defines(op)) {
            return new Refusal(
                    Wire.E_UNKNOWN_OP,
                    "unknown operation 0x" + Integer.toHexString(op)
                            + ((op & Wire.RESPONSE) != 0 ? " (an answer's op, not a request's)" : ""));
        }
        return null;
    }

    /**
     * Whether a request may start now: nothing is held back before it, no earlier write is unfinished, and, for a
     * write, no earlier request at all. Reads overlap one another.
     */
    private boolean mayStart(boolean write) {
        return held.isEmpty() && runningWrites == 0 && (!write || runningReads == 0);
    }

    /**
     * Runs a request: on the event loop if it can finish there, else on a worker. {@code counted} says whether
     * {@link #started} was already called for it (a request that was held back).
     */
    private void run(ChannelHandlerContext ctx, Call call, Work work, ByteBuf frame, boolean write, boolean counted) {
        long start = System.nanoTime();
        long bytes = frame.capacity();
        boolean done;
        try {
            done = work.inline().getAsBoolean();
        } catch (RuntimeException e) {
            failed(call, e);
            done = true;
        }
        if (done) {
            frame.release();
            server.metrics.request(call.op(), System.nanoTime() - start);
            if (counted) {
                finished(ctx, bytes);
            }
            return;
        }
        if (!counted) {
            started(ctx, bytes);
        }
        if (write) {
            runningWrites++;
        } else {
            runningReads++;
        }
        try {
            server.workers.execute(() -> {
                boolean handedOff = false;
                try {
                    Supplier<CompletableFuture<?>> later = work.later();
                    if (later == null) {
                        Checks.checkNotNull(work.onWorker(), "the work's worker part (it has no later part)")
                                .run();
                    } else {
                        // Answered when the work's future completes (a clear waiting for L3 up to its deadline): no
                        // worker waits meanwhile, and the connection's later requests are held back until then (§1).
                        later.get().whenComplete((ignored, t) -> {
                            if (t != null) {
                                failed(call, t);
                            }
                            ranOnWorker(ctx, call, frame, start, bytes, write);
                        });
                        handedOff = true;
                    }
                } catch (RuntimeException e) {
                    failed(call, e);
                } finally {
                    if (!handedOff) {
                        ranOnWorker(ctx, call, frame, start, bytes, write);
                    }
                }
            });
        } catch (RejectedExecutionException e) {
            frame.release();
            call.fail(Wire.E_SHUTTING_DOWN, "the daemon is shutting down");
            ranOnWorker(ctx, bytes, write);
        }
    }

    /** A request finished off the event loop: its frame is released, and the event loop learns it is done. */
    private void ranOnWorker(
            ChannelHandlerContext ctx, Call call, ByteBuf frame, long start, long bytes, boolean write) {
        frame.release();
        server.metrics.request(call.op(), System.nanoTime() - start);
        try {
            ctx.channel().eventLoop().execute(() -> ranOnWorker(ctx, bytes, write));
        } catch (RejectedExecutionException stopped) {
            server.inFlight.decrementAndGet(); // the event loop is gone: so is the connection
        }
    }

    /** A request finished on a worker: the ones held back behind it may start now. */
    private void ranOnWorker(ChannelHandlerContext ctx, long bytes, boolean write) {
        if (write) {
            runningWrites--;
        } else {
            runningReads--;
        }
        finished(ctx, bytes);
        while (!held.isEmpty() && runningWrites == 0 && (!held.peek().write() || runningReads == 0)) {
            Held h = held.poll();
            if (!ctx.channel().isActive()) {
                h.frame().release();
                finished(ctx, h.frame().capacity());
                continue;
            }
            run(ctx, h.call(), h.work(), h.frame(), h.write(), true);
        }
    }

    private void failed(Call call, Throwable e) {
        LOG.log(Level.WARNING, "request " + Wire.opName(call.op()) + " failed", e);
        call.fail(Wire.E_INTERNAL, String.valueOf(e.getMessage()));
    }

    private void started(ChannelHandlerContext ctx, long bytes) {
        server.inFlight.incrementAndGet();
        inFlightBytes += bytes;
        updateReading(ctx);
    }

    private void finished(ChannelHandlerContext ctx, long bytes) {
        server.inFlight.decrementAndGet();
        inFlightBytes -= bytes;
        updateReading(ctx);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        updateReading(ctx); // answers piled up beyond server.max-in-flight-bytes, or drained below half of it
        ctx.fireChannelWritabilityChanged();
    }

    /** Stops reading while the connection has too many bytes in progress, and starts again below half of them. */
    private void updateReading(ChannelHandlerContext ctx) {
        long limit = server.config.maxInFlightBytes();
        boolean pause = !ctx.channel().isWritable() || inFlightBytes >= limit || (paused && inFlightBytes > limit / 2);
        if (pause != paused) {
            paused = pause;
            ctx.channel().config().setAutoRead(!pause);
            if (pause) {
                server.metrics.pausedReads.inc();
            }
        }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof FrameDecoder.OverBudget over) {
            server.metrics.partialFramesRefused.inc();
            server.partialFramesLog.log(
                    "refused a frame from " + ctx.channel().remoteAddress() + ": " + over.getMessage());
            out.failAndClose(0, Wire.E_BUSY, over.getMessage());
            return;
        }
        if (cause instanceof TooLongFrameException) {
            out.failAndClose(
                    0,
                    Wire.E_TOO_LARGE,
                    session != null
                            ? "frame over the limit of " + server.config.maxFrameBytes() + " bytes"
                            : "a frame before HELLO may have at most " + HandshakeHandler.HELLO_FRAME_BYTES + " bytes");
            return;
        }
        server.metrics.error("connection");
        LOG.log(Level.DEBUG, () -> "closing a connection: " + cause);
        ctx.close();
    }
}
