package io.hicache.bench.server;

import io.hicache.core.util.Checks;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * A closed-loop load generator: a fixed set of connections to one server on loopback, each keeping {@code depth}
 * requests in flight (pipelined) and sending the next as each answer arrives. It knows nothing of the server but
 * its {@link LoadProtocol}, so both sides of a comparison meet the same client. All connections share one event
 * loop thread: the client's cost is small (page bodies are written from shared buffers and skipped, never copied,
 * on the way back) and equal for both sides.
 *
 * <p>{@link #run} is called by one thread at a time; {@link #close} closes the connections and the event loop.
 */
final class LoadGenerator implements AutoCloseable {
    /** The frames of the request numbered {@code index} in a phase, sent with {@code requestId}. */
    @FunctionalInterface
    interface Requests {
        ByteBuf[] frames(ByteBufAllocator alloc, long requestId, int index);
    }

    /**
     * A phase's outcome.
     *
     * @param nanos          from the first request sent to the last answer received
     * @param latencyNanos   per request, from being written to its answer being complete
     */
    record Phase(long nanos, long[] latencyNanos) {}

    private final LoadProtocol protocol;
    private final EventLoopGroup group;
    private final List<Connection> connections = new ArrayList<>();
    private final int depth;

    private LoadGenerator(LoadProtocol protocol, int depth) {
        this.protocol = protocol;
        this.depth = depth;
        this.group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    }

    /** Opens {@code connections} connections to 127.0.0.1:{@code port} and sends each its hello. */
    static LoadGenerator connect(LoadProtocol protocol, int port, int connections, int depth) throws Exception {
        LoadGenerator g = new LoadGenerator(protocol, depth);
        try {
            Bootstrap b = new Bootstrap()
                    .group(g.group)
                    .channel(NioSocketChannel.class)
                    .option(ChannelOption.TCP_NODELAY, true)
                    .handler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            Connection c = new Connection(g, protocol.decoder());
                            ch.pipeline().addLast(c);
                        }
                    });
            for (int i = 0; i < connections; i++) {
                Channel ch = b.connect("127.0.0.1", port).sync().channel();
                g.connections.add(ch.pipeline().get(Connection.class));
            }
            g.run(connections, (alloc, id, index) -> new ByteBuf[] {protocol.hello(alloc)});
            return g;
        } catch (Exception | Error e) {
            g.close();
            throw e;
        }
    }

    /**
     * Sends {@code count} requests, request {@code i} on connection {@code i % connections}, and waits for every
     * answer.
     */
    Phase run(int count, Requests requests) throws Exception {
        long[] latency = new long[count];
        CompletableFuture<Void> done = new CompletableFuture<>();
        AtomicInteger running = new AtomicInteger(connections.size());
        long start = System.nanoTime();
        for (int c = 0; c < connections.size(); c++) {
            Connection conn = connections.get(c);
            int first = c;
            conn.channel()
                    .eventLoop()
                    .execute(() -> conn.start(requests, first, connections.size(), count, latency, done, running));
        }
        done.get(10, TimeUnit.MINUTES);
        return new Phase(System.nanoTime() - start, latency);
    }

    /** One connection: its share of a phase's requests, {@code depth} at a time. Event-loop confined. */
    private static final class Connection extends ByteToMessageDecoder {
        private final LoadGenerator owner;
        private final LoadProtocol.Decoder decoder;
        /** Set when it joins its channel's pipeline, before {@link #connect} returns. */
        private @Nullable Channel channel;
        /** Set by {@link #start}, with {@code latency} and {@code running}: null before the first phase. */
        private @Nullable Requests requests;

        private int first;
        private int stride;
        private int mine;
        private int sent;
        private int answered;
        private long firstId; // request ids run on across phases, as answers of an ordered protocol are counted
        private long[] sentAt = new long[0];
        private long @Nullable [] latency;
        /** The phase's end while this connection is in one, else null. */
        private @Nullable CompletableFuture<Void> done;

        private @Nullable AtomicInteger running;

        Connection(LoadGenerator owner, LoadProtocol.Decoder decoder) {
            this.owner = owner;
            this.decoder = decoder;
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            channel = ctx.channel();
        }

        void start(
                Requests requests,
                int first,
                int stride,
                int count,
                long[] latency,
                CompletableFuture<Void> done,
                AtomicInteger running) {
            this.requests = requests;
            this.first = first;
            this.stride = stride;
            this.mine = count > first ? (count - first + stride - 1) / stride : 0;
            this.firstId += this.sent;
            this.sent = 0;
            this.answered = 0;
            this.latency = latency;
            this.done = done;
            this.running = running;
            if (sentAt.length < mine) {
                sentAt = new long[mine];
            }
            if (mine == 0) {
                finish();
                return;
            }
            while (sent < mine && sent < owner.depth) {
                send();
            }
            channel().flush();
        }

        /** The connection's channel, set when this handler was added to its pipeline. */
        private Channel channel() {
            return Checks.checkNotNull(channel, "a connection's channel");
        }

        private void send() {
            int k = sent++;
            Channel ch = channel();
            ByteBuf[] frames = Checks.checkNotNull(requests, "a started phase's requests")
                    .frames(ch.alloc(), firstId + k, first + k * stride);
            sentAt[k] = System.nanoTime();
            for (ByteBuf f : frames) {
                ch.write(f, ch.voidPromise());
            }
        }

        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
            while (in.isReadable()) {
                long id = decoder.next(in);
                if (id == LoadProtocol.Decoder.INCOMPLETE) {
                    return;
                }
                long k = id - firstId;
                if (done == null || k < 0 || k >= sent) {
                    throw new IllegalStateException(
                            owner.protocol.name() + " answered request " + id + ", which is not in flight");
                }
                Checks.checkNotNull(latency, "a started phase's latencies")[first + (int) k * stride] =
                        System.nanoTime() - sentAt[(int) k];
                answered++;
                if (sent < mine) {
                    send();
                } else if (answered == mine) {
                    finish();
                }
            }
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) throws Exception {
            ctx.flush();
            super.channelReadComplete(ctx);
        }

        private void finish() {
            CompletableFuture<Void> d = Checks.checkNotNull(done, "a started phase's end");
            done = null;
            if (Checks.checkNotNull(running, "a started phase's count of connections")
                            .decrementAndGet()
                    == 0) {
                d.complete(null);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (done != null) {
                done.completeExceptionally(cause);
            }
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            if (done != null) {
                done.completeExceptionally(new IllegalStateException(owner.protocol.name() + " closed a connection"));
            }
            super.channelInactive(ctx);
        }
    }

    @Override
    public void close() {
        for (Connection c : connections) {
            c.channel().close().syncUninterruptibly();
        }
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }
}
