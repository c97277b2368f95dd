package io.hicache.storage.remote;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.util.Checks;
import io.hicache.storage.remote.RemoteConnection.Reply;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.NettyTransport;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.IntConsumer;

/**
 * The {@code remote} page store: a HiCache daemon reached over the protocol of docs/protocol.md, so that an engine,
 * or another daemon, can use a daemon as its L3. A batch becomes one request per namespace and frame's worth of
 * pages, spread over {@code remote.connections} connections and pipelined on each; a connection that breaks is
 * replaced at its next use. Page bytes move between the caller's segments and Netty's direct buffers (a put copies
 * its sources before sending, so a put that times out never reads them later), and every page read is checked
 * against the checksum the daemon sent: damage on the way or in the daemon's memory reads as CORRUPT.
 *
 * <p>A client on the daemon's host may also {@linkplain #lease lease} pages: it maps the daemon's slab and reads
 * them in place, with no bytes sent.
 *
 * <p>Thread-safe. Futures complete on the client's I/O threads ({@code hicache-remote-io-*}): a dependent stage
 * must not block. The opener closes it; closing closes the connections and the I/O threads.
 */
public final class RemotePageStore extends AbstractPageStore {
    /** Answer bytes per page of a get (status, length, checksum) and of a lease (and the offset). */
    private static final int GET_ANSWER_BYTES = 9;
    private static final int LEASE_ANSWER_BYTES = 17;

    private final RemoteStoreConfig config;
    private final EventLoopGroup group;
    private final RemoteConnection.Hello hello;
    private final AtomicReferenceArray<CompletableFuture<RemoteConnection>> connections;
    private final AtomicInteger turn = new AtomicInteger();
    private final SlabMapping slab;
    private final NettyTransport transport;

    private RemotePageStore(RemoteStoreConfig config, NettyTransport transport, EventLoopGroup group,
            RemoteConnection first) {
        super("remote", config.host() + ":" + config.port(), new StoreCapabilities(
                EnumSet.of(Capability.PERSISTENT, Capability.SHARED), first.hello().maxPageBytes(), 256));
        this.config = config;
        this.transport = transport;
        this.group = group;
        this.hello = first.hello();
        this.connections = new AtomicReferenceArray<>(config.connections());
        connections.set(0, CompletableFuture.completedFuture(first));
        this.slab = new SlabMapping(hello.slabPath());
    }

    /**
     * Connects to the daemon and shakes hands on one connection (the others open at first use).
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the daemon cannot be reached or refuses
     *     the token or the protocol version
     */
    public static RemotePageStore open(RemoteStoreConfig config) {
        Checks.checkNotNull(config, "config");
        NettyTransport transport = config.transport().resolve();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(Math.min(config.connections(),
                Runtime.getRuntime().availableProcessors()), new DefaultThreadFactory("hicache-remote-io", true),
                transport.ioHandlerFactory());
        try {
            return new RemotePageStore(config, transport, group, RemoteConnection.open(group, transport, config).get());
        } catch (InterruptedException e) {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            Thread.currentThread().interrupt();
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "interrupted while connecting to " + config.host(), e);
        } catch (ExecutionException e) {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            if (e.getCause() instanceof HiCacheException h) {
                throw h;
            }
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "HiCache daemon at " + config.host() + ":"
                    + config.port() + ": cannot connect: " + e.getCause(), e.getCause());
        }
    }

    /** The socket transport this client runs on: {@code remote.transport} resolved (never {@code AUTO}). */
    public NettyTransport transport() {
        return transport;
    }

    /** The largest frame the daemon accepts. */
    public int maxFrameBytes() {
        return hello.maxFrameBytes();
    }

    /* ---------------------------------------------------------------- the page store contract */

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        List<int[]> runs = Requests.runs(keys, hello.maxFrameBytes());
        List<CompletableFuture<Integer>> counts = new ArrayList<>(runs.size());
        for (int[] run : runs) {
            counts.add(call(Wire.LEADING_HITS, deadline, out -> writeKeys(out, keys, run), new Reply<>() {
                @Override
                public Integer answer(ByteBuf in) {
                    return (int) Math.min(Codec.readUnsignedInt(in), run.length);
                }

                @Override
                public Integer noAnswer(PageStatus status, String detail) {
                    return 0;
                }
            }));
        }
        return CompletableFuture.allOf(counts.toArray(CompletableFuture[]::new)).thenApply(v -> {
            int hits = 0;
            for (int r = 0; r < runs.size(); r++) {
                int n = counts.get(r).join();
                hits += n;
                if (n < runs.get(r).length) {
                    break;
                }
            }
            return hits;
        });
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        BatchResult.Builder out = BatchResult.builder(targets.size());
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (int[] chunk : Requests.byNamespace(targets.keys(), hello.maxFrameBytes(),
                Wire.HASH_BYTES + 4 + GET_ANSWER_BYTES, i -> targets.page(i).byteSize())) {
            parts.add(call(Wire.GET, deadline, buf -> writeKeys(buf, targets.keys(), chunk,
                    i -> buf.writeInt((int) targets.page(i).byteSize())), new GetReply(targets, chunk, out)));
        }
        return allOf(parts).thenApply(v -> out.build());
    }

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        BatchResult.Builder out = BatchResult.builder(sources.size());
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (int[] chunk : Requests.byNamespace(sources.keys(), hello.maxFrameBytes(), Wire.HASH_BYTES + 8,
                i -> sources.page(i).byteSize())) {
            parts.add(callWith(Wire.PUT, deadline, c -> putPayload(c, sources, chunk), new StatusReply(chunk, out)));
        }
        return allOf(parts).thenApply(v -> out.build());
    }

    /** Namespace, count, then hash, length and checksum of each page, then the pages: copies, in direct buffers. */
    private static ByteBuf putPayload(RemoteConnection c, PageBatch sources, int[] chunk) {
        ByteBuf meta = c.payload(buf -> writeKeys(buf, sources.keys(), chunk, i -> {
            MemorySegment page = sources.page(i);
            buf.writeInt((int) page.byteSize());
            buf.writeInt(PageChecksum.of(page));
        }));
        CompositeByteBuf payload = meta.alloc().compositeDirectBuffer(chunk.length + 1).addComponent(true, meta);
        try {
            for (int i : chunk) {
                MemorySegment page = sources.page(i);
                payload.addComponent(true, c.buffer((int) page.byteSize()).writeBytes(page.asByteBuffer()));
            }
            return payload;
        } catch (RuntimeException | OutOfMemoryError e) {
            payload.release();
            throw e;
        }
    }

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        BatchResult.Builder out = BatchResult.builder(keys.size());
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (int[] chunk : Requests.byNamespace(keys, hello.maxFrameBytes(), Wire.HASH_BYTES + 1, i -> 0)) {
            parts.add(call(Wire.DELETE, deadline, buf -> writeKeys(buf, keys, chunk), new StatusReply(chunk, out)));
        }
        return allOf(parts).thenApply(v -> out.build());
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return call(Wire.CLEAR, deadline, buf -> Codec.writeNamespace(buf, namespace), new DoneReply("clear"));
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        return call(Wire.CLEAR_ALL, deadline, buf -> { }, new DoneReply("clear-all"));
    }

    @Override
    protected void doClose() {
        for (int i = 0; i < connections.length(); i++) {
            CompletableFuture<RemoteConnection> c = connections.get(i);
            if (c != null) {
                c.thenAccept(RemoteConnection::close);
            }
        }
        slab.close();
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }

    /* ---------------------------------------------------------------- beyond the contract */

    /**
     * Leases pages of one namespace, all {@code pageBytes} long, for at most {@code hold} (the daemon may shorten
     * it to its {@code server.max-lease}): the daemon keeps them from being evicted or reused, and this client
     * reads them in place by mapping the daemon's slab. Only for a client on the daemon's host that can open the
     * slab's file. Pages not in the daemon's memory are fetched from its L3 first.
     *
     * @throws IllegalArgumentException for keys of several namespaces, or more than one frame can carry
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} (in the future) when the slab cannot be mapped
     */
    public CompletableFuture<PageLease> lease(List<StoreKey> keys, long pageBytes, Duration hold, Deadline deadline) {
        Checks.checkNotNull(keys, "keys");
        Checks.checkNotNull(hold, "hold");
        Checks.checkNotNull(deadline, "deadline");
        Checks.requireArgument(!keys.isEmpty(), "a lease needs at least one key");
        Checks.requireArgument(pageBytes > 0 && pageBytes <= capabilities().maxPageBytes(),
                "pageBytes %d is not within 1..%d", pageBytes, capabilities().maxPageBytes());
        Checks.requireArgument(!hold.isNegative() && !hold.isZero(), "hold must be positive, was %s", hold);
        Namespace ns = keys.getFirst().namespace();
        for (StoreKey k : keys) {
            Checks.requireArgument(k.namespace().equals(ns), "a lease covers one namespace; %s is in another", k);
        }
        Checks.requireArgument((long) keys.size() * (Wire.HASH_BYTES + 4 + LEASE_ANSWER_BYTES)
                + Requests.OVERHEAD_BYTES <= hello.maxFrameBytes(), "%d keys do not fit one frame", keys.size());
        checkOpen();
        long millis = Math.min(0xFFFF_FFFFL, Math.max(1, hold.toMillis()));
        int[] all = new int[keys.size()];
        for (int i = 0; i < all.length; i++) {
            all[i] = i;
        }
        return connection(deadline).thenCompose(c -> c.send(Wire.LEASE, deadline, c.payload(buf -> {
            writeKeys(buf, keys, all, i -> buf.writeInt((int) pageBytes));
            buf.writeInt((int) millis);
        }), new Reply<PageLease>() {
            @Override
            public PageLease answer(ByteBuf in) {
                return PageLease.read(in, keys.size(), pageBytes, c, slab);
            }

            @Override
            public PageLease noAnswer(PageStatus status, String detail) {
                throw new HiCacheException(ErrorCode.STORE_IO, "lease of " + keys.size() + " pages: " + status + ": "
                        + detail);
            }
        }));
    }

    /** The daemon's metrics, in Prometheus' text format. */
    public CompletableFuture<String> daemonMetrics(Deadline deadline) {
        checkOpen();
        return call(Wire.STATS, deadline, buf -> { }, new Reply<>() {
            @Override
            public String answer(ByteBuf in) {
                int length = (int) Codec.readUnsignedInt(in);
                Codec.need(in, length, "metrics text");
                return in.readCharSequence(length, StandardCharsets.UTF_8).toString();
            }

            @Override
            public String noAnswer(PageStatus status, String detail) {
                throw new HiCacheException(ErrorCode.STORE_IO, "metrics: " + detail);
            }
        });
    }

    /** True if the daemon answers and is not shutting down. */
    public CompletableFuture<Boolean> daemonHealthy(Deadline deadline) {
        checkOpen();
        return call(Wire.HEALTH, deadline, buf -> { }, new Reply<>() {
            @Override
            public Boolean answer(ByteBuf in) {
                Codec.need(in, 1, "health");
                return in.readUnsignedByte() == 0;
            }

            @Override
            public Boolean noAnswer(PageStatus status, String detail) {
                return false;
            }
        });
    }

    /* ---------------------------------------------------------------- requests */

    /**
     * Sends one request with a deadline of {@code timeout} for the daemon, waiting {@code grace} longer for its
     * answer: {@link DaemonAdmin}'s, which may work until their deadline and answer then.
     */
    <T> CompletableFuture<T> callWithin(int op, Duration timeout, Duration grace, Consumer<ByteBuf> payload,
            Reply<T> reply) {
        long millis = Math.max(1, Math.min(timeout.toMillis(), 0xFFFF_FFFFL));
        return callWith(op, Deadline.after(timeout.plus(grace)), millis, c -> c.payload(payload), reply);
    }

    /** Sends one request, its payload written by {@code payload}, on the next connection. */
    private <T> CompletableFuture<T> call(int op, Deadline deadline, Consumer<ByteBuf> payload, Reply<T> reply) {
        return callWith(op, deadline, c -> c.payload(payload), reply);
    }

    /** Sends one request, its payload built by {@code payload} for the connection, on the next connection. */
    private <T> CompletableFuture<T> callWith(int op, Deadline deadline, Function<RemoteConnection, ByteBuf> payload,
            Reply<T> reply) {
        return callWith(op, deadline, -1, payload, reply);
    }

    /** As above, telling the daemon a deadline of {@code timeoutMillis} (-1: {@code deadline}'s). */
    private <T> CompletableFuture<T> callWith(int op, Deadline deadline, long timeoutMillis,
            Function<RemoteConnection, ByteBuf> payload, Reply<T> reply) {
        return connection(deadline).handle((c, error) -> {
            if (error != null) {
                Throwable cause = error.getCause() != null ? error.getCause() : error;
                return RemoteConnection.unsent(reply, deadline.isOver() ? PageStatus.stoppedBy(deadline)
                        : PageStatus.FAILED, cause.getMessage());
            }
            return timeoutMillis < 0 ? c.send(op, deadline, payload.apply(c), reply)
                    : c.send(op, deadline, timeoutMillis, payload.apply(c), reply);
        }).thenCompose(f -> f);
    }

    /** The next connection in turn, replacing it first if it broke. */
    private CompletableFuture<RemoteConnection> connection(Deadline deadline) {
        int slot = Math.floorMod(turn.getAndIncrement(), connections.length());
        while (true) {
            CompletableFuture<RemoteConnection> current = connections.get(slot);
            if (current != null && (!current.isDone() || (!current.isCompletedExceptionally() && current.join().isActive()))) {
                return current.isDone() ? current
                        : current.copy().orTimeout(Math.max(1, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
            }
            CompletableFuture<RemoteConnection> fresh = new CompletableFuture<>();
            if (connections.compareAndSet(slot, current, fresh)) {
                if (current != null && !current.isCompletedExceptionally()) {
                    current.join().close();
                }
                if (isClosed()) {
                    fresh.completeExceptionally(new HiCacheException(ErrorCode.STORE_CLOSED, "the store is closed"));
                } else {
                    RemoteConnection.open(group, transport, config).whenComplete((c, e) -> {
                        if (e != null) {
                            fresh.completeExceptionally(e);
                        } else {
                            fresh.complete(c);
                        }
                    });
                }
            }
        }
    }

    private static <T> CompletableFuture<Void> allOf(List<CompletableFuture<T>> parts) {
        return CompletableFuture.allOf(parts.toArray(CompletableFuture[]::new));
    }

    /** Namespace, count, then each key's hash and whatever {@code perKey} adds after it. */
    private static void writeKeys(ByteBuf out, List<StoreKey> keys, int[] indices, IntConsumer perKey) {
        Codec.writeNamespace(out, keys.get(indices[0]).namespace());
        out.writeInt(indices.length);
        for (int i : indices) {
            Codec.writeHash(out, keys.get(i).hash());
            perKey.accept(i);
        }
    }

    private static void writeKeys(ByteBuf out, List<StoreKey> keys, int[] indices) {
        writeKeys(out, keys, indices, i -> { });
    }

    /* ---------------------------------------------------------------- answers */

    /** The answer to one frame's pages of a batch: without an answer, each of its pages gets the failure. */
    private interface ChunkReply extends Reply<Void> {
        int[] chunk();

        BatchResult.Builder out();

        @Override
        default Void noAnswer(PageStatus status, String detail) {
            for (int i : chunk()) {
                out().set(i, status, detail);
            }
            return null;
        }
    }

    /** Per-page statuses (put, delete) into the batch's result. */
    private record StatusReply(int[] chunk, BatchResult.Builder out) implements ChunkReply {
        @Override
        public Void answer(ByteBuf in) {
            int n = Codec.readCount(in, 1, chunk.length);
            if (n != chunk.length) {
                throw new ProtocolException(n + " statuses for " + chunk.length + " pages");
            }
            for (int i : chunk) {
                PageStatus s = Wire.status(in.readByte());
                out.set(i, s, s.isSuccess() || s == PageStatus.MISS ? null : "the daemon answered " + s);
            }
            return null;
        }
    }

    /** A get's answer: statuses, then the bodies of the pages found, copied into their targets and verified. */
    private record GetReply(PageBatch targets, int[] chunk, BatchResult.Builder out) implements ChunkReply {
        @Override
        public Void answer(ByteBuf in) {
            int n = Codec.readCount(in, GET_ANSWER_BYTES, chunk.length);
            if (n != chunk.length) {
                throw new ProtocolException(n + " outcomes for " + chunk.length + " pages");
            }
            PageStatus[] statuses = new PageStatus[n];
            long[] lengths = new long[n];
            int[] crcs = new int[n];
            for (int j = 0; j < n; j++) {
                statuses[j] = Wire.status(in.readByte());
                lengths[j] = in.readUnsignedInt();
                crcs[j] = in.readInt();
            }
            for (int j = 0; j < n; j++) {
                int i = chunk[j];
                MemorySegment target = targets.page(i);
                switch (statuses[j]) {
                    case OK -> {
                        if (lengths[j] != target.byteSize()) {
                            throw new ProtocolException("page " + i + " came with " + lengths[j] + " bytes for a target of "
                                    + target.byteSize());
                        }
                        Codec.need(in, (int) lengths[j], "page");
                        in.getBytes(in.readerIndex(), target.asByteBuffer());
                        in.skipBytes((int) lengths[j]);
                        int crc = PageChecksum.of(target);
                        if (crc != crcs[j]) {
                            out.set(i, PageStatus.CORRUPT, "checksum " + Integer.toHexString(crc) + ", the daemon sent "
                                    + Integer.toHexString(crcs[j]));
                        } else {
                            out.set(i, PageStatus.OK);
                        }
                    }
                    case SIZE_MISMATCH -> out.set(i, PageStatus.SIZE_MISMATCH, "the stored page is " + lengths[j]
                            + " bytes, the target " + target.byteSize());
                    case MISS -> out.set(i, PageStatus.MISS);
                    default -> out.set(i, statuses[j], "the daemon answered " + statuses[j]);
                }
            }
            return null;
        }
    }

    /** An answer with nothing in it (clear); no answer is an error. */
    private record DoneReply(String what) implements Reply<Void> {
        @Override
        public Void answer(ByteBuf in) {
            return null;
        }

        @Override
        public Void noAnswer(PageStatus status, String detail) {
            throw new HiCacheException(ErrorCode.STORE_IO, what + " on the daemon: " + status + ": " + detail);
        }
    }
}
