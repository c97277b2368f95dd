package io.hicache.storage.remote;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.store.PageStatus;
import io.hicache.core.util.Checks;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.FrameHeader;
import io.hicache.storage.remote.protocol.Hello;
import io.hicache.storage.remote.protocol.NettyTransport;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Request;
import io.hicache.storage.remote.protocol.RequestEncoder;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.ssl.SslHandler;
import java.lang.System.Logger.Level;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * One connection of the {@code remote} store to a daemon: the handshake, then pipelined requests matched to their
 * answers by request id. A request whose deadline passes (or is cancelled) before its answer comes is completed as
 * timed out (or cancelled) by a sweep every few milliseconds; its late answer is dropped unread. When the connection
 * closes, every request still pending on it completes as FAILED.
 *
 * <p>Thread-safe: requests may be sent from any thread. Answers are read on the connection's I/O thread, and the
 * futures complete there (a dependent stage must not block). Whoever removes a request from the pending map, the
 * answer or the sweep, is the only one to complete it, so a get that timed out never writes its targets afterwards.
 */
final class RemoteConnection {
    private static final System.Logger LOG = System.getLogger(RemoteConnection.class.getName());
    private static final long SWEEP_MILLIS = 5;
    /** Frames from the daemon are bounded by its own limit, which the client learns only from the handshake. */
    private static final int MAX_INBOUND_FRAME = Integer.MAX_VALUE - 8;

    /** What the daemon said in its answer to HELLO. */
    record HelloAnswer(int version, int maxFrameBytes, int maxPageBytes, String slabPath) {}

    /** How a request ends: with its answer's payload, or with a status when it gets none. */
    interface Reply<T> {
        /** Reads the answer (on the I/O thread; the payload is released afterwards). */
        T answer(ByteBuf payload);

        /**
         * The outcome without an answer: an ERROR frame, a timeout, a lost connection. May throw to fail.
         * {@code detail} is null when the failure had no message (a connection attempt that timed out).
         */
        T noAnswer(PageStatus status, @Nullable String detail);
    }

    private record Pending<T>(int op, Deadline deadline, Reply<T> reply, CompletableFuture<T> future) {
        /** Completes with the answer; a malformed one completes as FAILED and is rethrown to close the connection. */
        void answer(ByteBuf payload) {
            try {
                future.complete(reply.answer(payload));
            } catch (ProtocolException e) {
                noAnswer(PageStatus.FAILED, "a malformed answer from the daemon: " + e.getMessage());
                throw e;
            } catch (RuntimeException e) {
                future.completeExceptionally(e);
            }
        }

        void noAnswer(PageStatus status, @Nullable String detail) {
            try {
                future.complete(reply.noAnswer(status, detail));
            } catch (RuntimeException e) {
                future.completeExceptionally(e);
            }
        }
    }

    private final String address;
    private final ConcurrentHashMap<Long, Pending<?>> pending = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong();
    // Set once connected (channel, sweep) and once the handshake is done (helloAnswer): before the connection is
    // handed out, except that close() may run on one that never connected.
    private volatile @Nullable Channel channel;
    private volatile @Nullable HelloAnswer helloAnswer;
    private volatile @Nullable ScheduledFuture<?> sweep;

    private RemoteConnection(String address) {
        this.address = address;
    }

    /**
     * Connects and shakes hands; the future completes once the daemon accepted the token and version, or fails
     * with a {@link HiCacheException} ({@link ErrorCode#STORE_UNAVAILABLE}) saying why.
     */
    static CompletableFuture<RemoteConnection> open(
            EventLoopGroup group, NettyTransport transport, RemoteStoreConfig config) {
        RemoteConnection c = new RemoteConnection(config.host() + ":" + config.port());
        CompletableFuture<RemoteConnection> ready = new CompletableFuture<>();
        Bootstrap b = new Bootstrap()
                .group(group)
                .channel(transport.socketChannel())
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int)
                        Math.min(Integer.MAX_VALUE, config.connectTimeout().toMillis()))
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        if (config.tls().on()) {
                            ch.pipeline().addLast(config.tls().handler(ch, config.host(), config.port()));
                        }
                        LengthFieldBasedFrameDecoder frames =
                                new LengthFieldBasedFrameDecoder(MAX_INBOUND_FRAME, 0, 4, 0, 4, true);
                        // A GET answer of many pages is tens of MiB: merging reads into one buffer would grow it
                        // 4 MiB at a time, copying it whole each time; a composite keeps the reads as they came.
                        frames.setCumulator(ByteToMessageDecoder.COMPOSITE_CUMULATOR);
                        ch.pipeline().addLast(frames);
                        ch.pipeline().addLast(c.new Inbound());
                    }
                });
        b.connect(config.host(), config.port()).addListener((ChannelFuture f) -> {
            if (!f.isSuccess()) {
                ready.completeExceptionally(unavailable(c.address, connectFailure(f.cause())));
                return;
            }
            c.channel = f.channel();
            SslHandler ssl = f.channel().pipeline().get(SslHandler.class);
            if (ssl != null) {
                // A refused certificate, either way, is said as such rather than as a closed connection.
                ssl.handshakeFuture().addListener(h -> {
                    if (!h.isSuccess()) {
                        ready.completeExceptionally(unavailable(
                                c.address,
                                "the TLS handshake failed: " + h.cause().getMessage()));
                    }
                });
            }
            c.sweep = f.channel()
                    .eventLoop()
                    .scheduleAtFixedRate(c::sweep, SWEEP_MILLIS, SWEEP_MILLIS, TimeUnit.MILLISECONDS);
            c.handshake(config, ready);
        });
        return ready.orTimeout(config.connectTimeout().toMillis() + 100, TimeUnit.MILLISECONDS)
                .whenComplete((conn, e) -> {
                    if (e != null) {
                        c.close();
                    }
                });
    }

    private void handshake(RemoteStoreConfig config, CompletableFuture<RemoteConnection> ready) {
        // Version 3: the only one that carries whole namespaces (weights revision, page size, tenant: docs/keys.md).
        Hello hello = new Hello(Wire.VERSION_3, config.authToken(), WireChecksum.CRC32C);
        send(hello, Deadline.after(config.connectTimeout()), new Reply<HelloAnswer>() {
                    @Override
                    public HelloAnswer answer(ByteBuf in) {
                        HelloAnswer answer = new HelloAnswer(
                                Codec.readUnsignedShort(in),
                                (int) Codec.readUnsignedInt(in),
                                (int) Codec.readUnsignedInt(in),
                                Codec.readString(in));
                        Codec.readUnsignedByte(in); // the checksum, CRC-32C as asked
                        return answer;
                    }

                    @Override
                    public HelloAnswer noAnswer(PageStatus status, @Nullable String detail) {
                        if (status == PageStatus.TIMED_OUT) {
                            // Something accepted the connection but never answered HELLO: most often the daemon's
                            // metrics port (HTTP), or another program entirely.
                            throw unavailable(
                                    address,
                                    "no answer to the protocol's handshake within "
                                            + config.connectTimeout().toMillis() + " ms: is that the daemon's protocol "
                                            + "port (server.port, default 7370)? Its metrics port speaks HTTP");
                        }
                        throw unavailable(
                                address,
                                "the handshake failed: " + detail
                                        + (config.tls().on()
                                                ? " (over TLS: a daemon that asks for client certificates closes "
                                                        + "on one it does not accept, or on none: remote.tls-cert)"
                                                : ""));
                    }
                })
                .whenComplete((h, e) -> {
                    if (e != null) {
                        ready.completeExceptionally(e);
                    } else {
                        helloAnswer = h;
                        ready.complete(this);
                    }
                });
    }

    /** Why a connect failed, in words: the OS's text without Netty's wrapping, and what to try. */
    private static String connectFailure(Throwable cause) {
        String text = String.valueOf(cause.getMessage());
        if (text.contains("Connection refused")) {
            return "nothing listens there (connection refused); is the daemon running, on this host and port? "
                    + "'hicache serve' starts one";
        }
        if (text.contains("No route to host") || text.contains("Network is unreachable")) {
            return "cannot reach the host (" + text.replaceAll(".*: ", "") + ")";
        }
        return "cannot connect: " + text;
    }

    private static HiCacheException unavailable(String address, String why) {
        return new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "HiCache daemon at " + address + ": " + why);
    }

    /** The daemon's answer to this connection's HELLO. */
    HelloAnswer hello() {
        return Checks.checkNotNull(helloAnswer, "the answer to HELLO (a connection is handed out after it)");
    }

    boolean isActive() {
        Channel ch = channel;
        return ch != null && ch.isActive();
    }

    /** The allocator of the connection's buffers (pooled, direct): for a PUT's bodies. */
    ByteBufAllocator alloc() {
        return Checks.checkNotNull(channel, "the channel (a connection is handed out once connected)")
                .alloc();
    }

    /** Sends {@code request} and returns the future its reply completes. */
    <T> CompletableFuture<T> send(Request request, Deadline deadline, Reply<T> reply) {
        return send(
                request, deadline, Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()) + 1), reply);
    }

    /**
     * As {@link #send(Request, Deadline, Reply)}, telling the daemon a deadline of {@code timeoutMillis} while
     * waiting for its answer until {@code deadline}: for requests that may take until their deadline and answer then.
     * A PUT's bodies are taken over (released once sent, or if the frame cannot be made).
     */
    <T> CompletableFuture<T> send(Request request, Deadline deadline, long timeoutMillis, Reply<T> reply) {
        long id = ids.incrementAndGet();
        // The handshake's HELLO is sent once connected; everything else once handed out.
        Channel ch = Checks.checkNotNull(channel, "the channel");
        // One write per frame: two (header, then payload) from several threads could interleave on the wire.
        ByteBuf frame = RequestEncoder.frame(ch.alloc(), request, id, timeoutMillis);
        Pending<T> p = new Pending<>(request.op(), deadline, reply, new CompletableFuture<>());
        pending.put(id, p);
        ch.writeAndFlush(frame).addListener(f -> {
            if (!f.isSuccess()) {
                complete(id, PageStatus.FAILED, "cannot send to the daemon at " + address + ": " + f.cause());
            }
        });
        return p.future;
    }

    /** The future of a request never sent, completed as {@code reply} says for {@code status}. */
    static <T> CompletableFuture<T> unsent(Reply<T> reply, PageStatus status, @Nullable String detail) {
        Pending<T> p = new Pending<>(0, Deadline.expired(), reply, new CompletableFuture<>());
        p.noAnswer(status, detail);
        return p.future;
    }

    private void complete(long id, PageStatus status, String detail) {
        Pending<?> p = pending.remove(id);
        if (p != null) {
            p.noAnswer(status, detail);
        }
    }

    private void sweep() {
        pending.forEach((id, p) -> {
            if (p.deadline.isOver() && pending.remove(id, p)) {
                p.noAnswer(
                        PageStatus.stoppedBy(p.deadline),
                        "no answer from the daemon at " + address + " by the deadline");
            }
        });
    }

    private void failAll(String detail) {
        pending.forEach((id, p) -> complete(id, PageStatus.FAILED, detail));
    }

    /** Closes the connection; pending requests complete as FAILED. */
    void close() {
        ScheduledFuture<?> s = sweep;
        if (s != null) {
            s.cancel(false);
        }
        Channel ch = channel;
        if (ch != null) {
            ch.close();
        }
        failAll("the connection to the daemon at " + address + " was closed");
    }

    /** Reads answers and matches them to their requests. */
    private final class Inbound extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf frame = (ByteBuf) msg;
            try {
                FrameHeader header = FrameHeader.read(frame);
                int op = header.op();
                long id = header.requestId();
                if (op == (Wire.ERROR & 0xFF)) {
                    int code = Codec.readUnsignedShort(frame);
                    String message = Codec.readString(frame);
                    String detail = "the daemon at " + address + " answered error " + code + " (" + Wire.errorName(code)
                            + "): " + message;
                    if (id == 0) {
                        failAll(detail); // about the connection, not one request; the daemon closes it
                    } else {
                        complete(id, PageStatus.FAILED, detail);
                    }
                    return;
                }
                Pending<?> p = pending.remove(id);
                if (p == null) {
                    return; // the request timed out and was completed without its answer
                }
                if (op != (p.op | Wire.RESPONSE)) {
                    p.noAnswer(
                            PageStatus.FAILED, "the daemon answered " + Wire.opName(op) + " to " + Wire.opName(p.op));
                    ctx.close();
                    return;
                }
                p.answer(frame);
            } catch (ProtocolException e) {
                LOG.log(Level.WARNING, "closing the connection to " + address + ": " + e.getMessage());
                ctx.close();
            } finally {
                frame.release();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            failAll("the connection to the daemon at " + address + " closed");
            ScheduledFuture<?> s = sweep;
            if (s != null) {
                s.cancel(false);
            }
            ctx.fireChannelInactive();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            LOG.log(Level.DEBUG, () -> "connection to " + address + " failed: " + cause);
            ctx.close();
        }
    }
}
