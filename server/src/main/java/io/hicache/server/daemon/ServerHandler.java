package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.TooLongFrameException;
import java.lang.System.Logger.Level;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * One client connection of the daemon: the handshake, then requests ({@link Operations}), each answered with its
 * request's id so that a client can pipeline. Work that cannot finish on the event loop goes to the worker threads.
 * Reading from the connection pauses while it has {@code server.max-in-flight-bytes} in progress: requests on the
 * workers, or answers the client has not taken yet.
 *
 * <p>Writes (PUT, DELETE, CLEAR, CLEAR_ALL, RESERVE, COMMIT, FLUSH, STORE) take effect in the order the client sent them: a request that must not
 * overtake an earlier one still on a worker (a write behind anything, anything behind a write) is held back, its
 * bytes counted as in flight, and started when that one finishes. Reads overlap one another.
 *
 * <p>Admin operations (FLUSH, STORE DETACH and ATTACH, CLEAR_ALL) run only on a connection with admin permission
 * ({@link #mayAdminister}); elsewhere they are ERROR AUTH and the connection stays.
 *
 * <p>A malformed request gets an ERROR answer and the connection stays; a malformed or refused handshake, a request
 * before the handshake and a frame over the size limit get an ERROR answer and the connection is closed.
 *
 * <p>One instance per connection; its state is touched by the connection's event loop only.
 */
final class ServerHandler extends ChannelInboundHandlerAdapter {
    private static final System.Logger LOG = System.getLogger(ServerHandler.class.getName());
    private static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(30);

    private final HiCacheServer server;
    private final Operations operations;
    private final NamespaceCache namespaces = new NamespaceCache();
    private Responder out;
    /** The frame decoder's name in the pipeline. */
    static final String FRAMES = "frames";
    /** The largest frame accepted before a HELLO: a HELLO with the longest token (its declared length). */
    static final int HELLO_FRAME_BYTES = Wire.HEADER_BYTES + 9 + Codec.MAX_STRING_BYTES; // version 2's checksum byte included

    private boolean counted;
    private boolean authenticated;
    /** Whether this connection may run admin operations (see {@link #adminRefusal}); set by its HELLO. */
    private boolean admin;
    /** The protocol version HELLO agreed on, and the page checksum on the wire (version 2 may choose CRC-32). */
    private int version = Wire.VERSION;
    private WireChecksum checksum = WireChecksum.CRC32C;
    /** Set once the connection is to close: frames the decoder already cut behind the one refused do not run. */
    private boolean closing;
    private long inFlightBytes;
    private boolean paused;

    ServerHandler(HiCacheServer server, Operations operations) {
        this.server = server;
        this.operations = operations;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        out = new Responder(ctx, server.metrics);
    }

    /** A request held back behind an earlier one it must not overtake (see {@link #mayStart}). */
    private record Held(Operations.Request request, Operations.Work work, ByteBuf frame, boolean write) {
    }

    /** Requests of this connection on the workers, reads and writes. */
    private int runningReads;
    private int runningWrites;
    private final ArrayDeque<Held> held = new ArrayDeque<>();

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        long waitMillis = server.config.handshakeTimeout().toMillis();
        ctx.executor().schedule(() -> {
            if (!authenticated && !closing && ctx.channel().isActive()) {
                failAndClose(0, Wire.E_AUTH, "no HELLO within " + waitMillis + " ms");
            }
        }, waitMillis, TimeUnit.MILLISECONDS);
        counted = true;
        if (server.metrics.connections.incrementAndGet() > server.config.maxConnections()) {
            server.metrics.connectionsRefused.inc();
            failAndClose(0, Wire.E_BUSY, "the daemon is at its connection limit (" + server.config.maxConnections() + ")");
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
        ByteBuf frame = (ByteBuf) msg;
        if (closing) {
            frame.release();
            return;
        }
        server.metrics.bytesIn.inc(frame.readableBytes() + 4L);
        Operations.Request r;
        try {
            Codec.need(frame, Wire.HEADER_BYTES, "header");
            int op = frame.readUnsignedByte();
            int flags = frame.readUnsignedByte();
            frame.skipBytes(2);
            long id = frame.readLong();
            long timeoutMillis = frame.readUnsignedInt();
            r = new Operations.Request(op, version == Wire.VERSION_2 ? flags : 0, id, Deadline.after(timeoutMillis > 0
                    ? Duration.ofMillis(timeoutMillis) : DEFAULT_TIMEOUT));
        } catch (ProtocolException e) {
            frame.release();
            failAndClose(0, Wire.E_MALFORMED, e.getMessage());
            return;
        }
        if (r.op() == Wire.HELLO || !authenticated) {
            try {
                hello(r, frame);
            } finally {
                frame.release();
            }
            return;
        }
        if (server.shuttingDown() && r.op() != Wire.HEALTH && r.op() != Wire.STATS) {
            frame.release();
            out.fail(r.id(), Wire.E_SHUTTING_DOWN, "the daemon is shutting down", false);
            return;
        }
        String refusal = admin ? null : adminRefusal(r.op(), frame);
        if (refusal != null) {
            frame.release();
            out.fail(r.id(), Wire.E_AUTH, refusal, false);
            return;
        }
        Operations.Work work;
        try {
            work = operations.parse(out, r, frame, namespaces, version, checksum);
        } catch (ProtocolException e) {
            frame.release();
            out.fail(r.id(), Wire.E_MALFORMED, e.getMessage(), false);
            return;
        }
        if (work == null) {
            frame.release();
            out.fail(r.id(), Wire.E_UNKNOWN_OP, "unknown operation 0x" + Integer.toHexString(r.op())
                    + ((r.op() & Wire.RESPONSE) != 0 ? " (an answer's op, not a request's)" : ""), false);
            return;
        }
        boolean write = isWrite(r.op());
        if (!mayStart(write)) {
            started(ctx, frame.capacity());
            held.add(new Held(r, work, frame, write));
            return;
        }
        run(ctx, r, work, frame, write, false);
    }

    /**
     * Why a connection without admin permission may not run this request, or null if it may: FLUSH, STORE DETACH and
     * ATTACH, and CLEAR_ALL are the operator's. (STORE SHOW only names the store; CLEAR clears one namespace, a
     * client's own.)
     */
    private String adminRefusal(int op, ByteBuf frame) {
        boolean adminOp = op == Wire.FLUSH || op == Wire.CLEAR_ALL
                || op == Wire.STORE && frame.isReadable() && frame.getUnsignedByte(frame.readerIndex()) != Wire.STORE_SHOW;
        if (!adminOp) {
            return null;
        }
        return Wire.opName(op) + " is an admin operation: " + (server.config.adminToken().isEmpty()
                ? "without server.admin-token the daemon accepts admin operations only from loopback peers, and this "
                        + "connection comes from " + ctx().channel().remoteAddress()
                : "this connection's HELLO did not carry server.admin-token");
    }

    private ChannelHandlerContext ctx() {
        return out.context();
    }

    /** Writes change pages; a connection's requests take effect in order where one of two is a write. */
    private static boolean isWrite(int op) {
        return op == Wire.PUT || op == Wire.DELETE || op == Wire.CLEAR || op == Wire.CLEAR_ALL || op == Wire.RESERVE
                || op == Wire.COMMIT || op == Wire.FLUSH || op == Wire.STORE;
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
    private void run(ChannelHandlerContext ctx, Operations.Request r, Operations.Work work, ByteBuf frame, boolean write,
            boolean counted) {
        long start = System.nanoTime();
        long bytes = frame.capacity();
        boolean done;
        try {
            done = work.inline().getAsBoolean();
        } catch (RuntimeException e) {
            failed(r, e);
            done = true;
        }
        if (done) {
            frame.release();
            server.metrics.request(r.op(), System.nanoTime() - start);
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
                    if (work.later() == null) {
                        work.onWorker().run();
                    } else {
                        // Answered when the work's future completes (a clear waiting for L3 up to its deadline): no
                        // worker waits meanwhile, and the connection's later requests are held back until then (§1).
                        work.later().get().whenComplete((ignored, t) -> {
                            if (t != null) {
                                failed(r, t);
                            }
                            ranOnWorker(ctx, r, frame, start, bytes, write);
                        });
                        handedOff = true;
                    }
                } catch (RuntimeException e) {
                    failed(r, e);
                } finally {
                    if (!handedOff) {
                        ranOnWorker(ctx, r, frame, start, bytes, write);
                    }
                }
            });
        } catch (RejectedExecutionException e) {
            frame.release();
            out.fail(r.id(), Wire.E_SHUTTING_DOWN, "the daemon is shutting down", false);
            ranOnWorker(ctx, bytes, write);
        }
    }

    /** A request finished off the event loop: its frame is released, and the event loop learns it is done. */
    private void ranOnWorker(ChannelHandlerContext ctx, Operations.Request r, ByteBuf frame, long start, long bytes,
            boolean write) {
        frame.release();
        server.metrics.request(r.op(), System.nanoTime() - start);
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
            run(ctx, h.request(), h.work(), h.frame(), h.write(), true);
        }
    }

    /** Answers ERROR and closes the connection; nothing it sent after this frame is run. */
    private void failAndClose(long requestId, short code, String message) {
        closing = true;
        out.fail(requestId, code, message, true);
    }

    private void failed(Operations.Request r, Throwable e) {
        LOG.log(Level.WARNING, "request " + Wire.opName(r.op()) + " failed", e);
        out.fail(r.id(), Wire.E_INTERNAL, String.valueOf(e.getMessage()), false);
    }

    /** The handshake: magic, version and token; anything else first closes the connection. */
    private void hello(Operations.Request r, ByteBuf in) {
        if (r.op() != Wire.HELLO) {
            failAndClose(r.id(), Wire.E_AUTH, "the first frame must be HELLO");
            return;
        }
        if (authenticated) {
            out.fail(r.id(), Wire.E_MALFORMED, "HELLO was already accepted on this connection", false);
            return;
        }
        try {
            long magic = Codec.readUnsignedInt(in);
            int asked = Codec.readUnsignedShort(in);
            if (magic != Wire.MAGIC) {
                failAndClose(r.id(), Wire.E_MALFORMED, "not a HiCache client (bad magic)");
                return;
            }
            if (asked != Wire.VERSION && asked != Wire.VERSION_2) {
                failAndClose(r.id(), Wire.E_VERSION, "protocol version " + asked + " is not spoken here (this daemon: "
                        + Wire.VERSION + " and " + Wire.VERSION_2 + ")");
                return;
            }
            // §2: a token is a string, at most 2,048 bytes; a longer one makes the HELLO too large, whichever version
            // (a version 1 HELLO with a 2,049-byte token still fits the pre-HELLO frame limit, which counts version
            // 2's checksum byte).
            if (in.readableBytes() >= 2 && in.getUnsignedShort(in.readerIndex()) > Codec.MAX_STRING_BYTES) {
                failAndClose(r.id(), Wire.E_TOO_LARGE, "a token of " + in.getUnsignedShort(in.readerIndex())
                        + " bytes is over the limit of " + Codec.MAX_STRING_BYTES);
                return;
            }
            String token = Codec.readString(in);
            WireChecksum sum = asked == Wire.VERSION_2 ? WireChecksum.ofCode(Codec.readUnsignedByte(in))
                    : WireChecksum.CRC32C;
            if (in.isReadable()) {
                failAndClose(r.id(), Wire.E_MALFORMED, in.readableBytes() + " bytes after the end of the HELLO");
                return;
            }
            byte[] given = token.getBytes(StandardCharsets.UTF_8);
            String adminToken = server.config.adminToken();
            boolean isAdmin = !adminToken.isEmpty() && MessageDigest.isEqual(given,
                    adminToken.getBytes(StandardCharsets.UTF_8));
            if (!isAdmin && !MessageDigest.isEqual(given, server.config.authToken().getBytes(StandardCharsets.UTF_8))) {
                failAndClose(r.id(), Wire.E_AUTH, server.config.authToken().isEmpty() && adminToken.isEmpty()
                        ? "this daemon has no auth token, and the HELLO carried one" : "wrong auth token");
                return;
            }
            version = asked;
            checksum = sum;
            admin = mayAdminister(isAdmin, !adminToken.isEmpty(), ctx().channel().remoteAddress());
        } catch (ProtocolException e) {
            failAndClose(r.id(), Wire.E_MALFORMED, e.getMessage());
            return;
        }
        authenticated = true;
        ByteBuf answer = out.begin(Wire.HELLO, r.id());
        answer.writeShort(version);
        answer.writeInt(server.config.maxFrameBytes());
        answer.writeInt(server.config.maxPageBytes());
        Codec.writeString(answer, server.cache.file().toString());
        if (version == Wire.VERSION_2) {
            answer.writeByte(checksum.code());
        }
        out.send(answer);
        // Frames of any allowed size from now on. The old decoder hands the bytes it holds to the new one, which may
        // run requests pipelined behind the HELLO right here: hence after the HELLO's answer.
        out.context().pipeline().replace(FRAMES, FRAMES, new FrameDecoder(server.config.maxFrameBytes(), server.partialFrames));
    }

    /**
     * Whether a connection may run admin operations: with {@code server.admin-token} set, when its HELLO carried it;
     * without, when it comes from a loopback address.
     */
    static boolean mayAdminister(boolean helloCarriedAdminToken, boolean adminTokenSet, SocketAddress peer) {
        if (adminTokenSet) {
            return helloCarriedAdminToken;
        }
        return peer instanceof InetSocketAddress a && a.getAddress() != null && a.getAddress().isLoopbackAddress();
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
            server.partialFramesLog.log("refused a frame from " + ctx.channel().remoteAddress() + ": " + over.getMessage());
            failAndClose(0, Wire.E_BUSY, over.getMessage());
            return;
        }
        if (cause instanceof TooLongFrameException) {
            failAndClose(0, Wire.E_TOO_LARGE, authenticated
                    ? "frame over the limit of " + server.config.maxFrameBytes() + " bytes"
                    : "a frame before HELLO may have at most " + HELLO_FRAME_BYTES + " bytes");
            return;
        }
        server.metrics.error("connection");
        LOG.log(Level.DEBUG, () -> "closing a connection: " + cause);
        ctx.close();
    }
}
