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
import io.hicache.storage.remote.protocol.AdminRequest;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.NettyTransport;
import io.hicache.storage.remote.protocol.ReadRequest;
import io.hicache.storage.remote.protocol.Request;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WriteRequest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

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
    private final RemoteStoreConfig config;
    private final EventLoopGroup group;
    private final RemoteConnection.HelloAnswer hello;
    private final AtomicReferenceArray<CompletableFuture<RemoteConnection>> connections;
    private final AtomicInteger turn = new AtomicInteger();
    private final SlabMapping slab;
    private final NettyTransport transport;

    private RemotePageStore(
            RemoteStoreConfig config, NettyTransport transport, EventLoopGroup group, RemoteConnection first) {
        super(
                "remote",
                config.host() + ":" + config.port(),
                new StoreCapabilities(
                        EnumSet.of(Capability.PERSISTENT, Capability.SHARED),
                        first.hello().maxPageBytes(),
                        256));
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
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(
                Math.min(config.connections(), Runtime.getRuntime().availableProcessors()),
                new DefaultThreadFactory("hicache-remote-io", true),
                transport.ioHandlerFactory());
        try {
            return new RemotePageStore(
                    config,
                    transport,
                    group,
                    RemoteConnection.open(group, transport, config).get());
        } catch (InterruptedException e) {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            Thread.currentThread().interrupt();
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE, "interrupted while connecting to " + config.host(), e);
        } catch (ExecutionException e) {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS);
            if (e.getCause() instanceof HiCacheException h) {
                throw h;
            }
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "HiCache daemon at " + config.host() + ":" + config.port() + ": cannot connect: " + e.getCause(),
                    e.getCause());
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
            List<StoreKey> some = subList(keys, run);
            counts.add(call(new ReadRequest.LeadingHits(some.getFirst().namespace(), some), deadline, new Reply<>() {
                @Override
                public Integer answer(ByteBuf in) {
                    return (int) Math.min(Codec.readUnsignedInt(in), run.length);
                }

                @Override
                public Integer noAnswer(PageStatus status, @Nullable String detail) {
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
        for (int[] chunk : Requests.byNamespace(
                targets.keys(),
                hello.maxFrameBytes(),
                Wire.HASH_BYTES + 4 + Answers.GET_ANSWER_BYTES,
                i -> targets.page(i).byteSize())) {
            List<StoreKey> keys = subList(targets.keys(), chunk);
            int[] lengths = new int[chunk.length];
            for (int j = 0; j < chunk.length; j++) {
                lengths[j] = (int) targets.page(chunk[j]).byteSize();
            }
            parts.add(call(
                    new ReadRequest.Get(keys.getFirst().namespace(), keys, lengths),
                    deadline,
                    new Answers.Pages(targets, chunk, out)));
        }
        return allOf(parts).thenApply(v -> out.build());
    }

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        BatchResult.Builder out = BatchResult.builder(sources.size());
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (int[] chunk : Requests.byNamespace(
                sources.keys(),
                hello.maxFrameBytes(),
                Wire.HASH_BYTES + 8,
                i -> sources.page(i).byteSize())) {
            parts.add(callWith(
                    deadline,
                    -1,
                    c -> put(c.alloc(), sources, chunk, config.putUnchecked()),
                    new Answers.Statuses(chunk, out)));
        }
        return allOf(parts).thenApply(v -> out.build());
    }

    /**
     * A PUT of {@code chunk}'s pages: their lengths and checksums, and copies of their bytes in direct buffers; flagged
     * {@code UNCHECKED} with {@code unchecked}.
     */
    private static WriteRequest.Put put(ByteBufAllocator alloc, PageBatch sources, int[] chunk, boolean unchecked) {
        List<StoreKey> keys = subList(sources.keys(), chunk);
        int[] lengths = new int[chunk.length];
        int[] crcs = new int[chunk.length];
        CompositeByteBuf bodies = alloc.compositeDirectBuffer(chunk.length);
        try {
            for (int j = 0; j < chunk.length; j++) {
                MemorySegment page = sources.page(chunk[j]);
                lengths[j] = (int) page.byteSize();
                crcs[j] = PageChecksum.of(page);
                bodies.addComponent(true, alloc.directBuffer(lengths[j]).writeBytes(page.asByteBuffer()));
            }
            return new WriteRequest.Put(keys.getFirst().namespace(), keys, lengths, crcs, bodies, unchecked);
        } catch (RuntimeException | OutOfMemoryError e) {
            bodies.release();
            throw e;
        }
    }

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        BatchResult.Builder out = BatchResult.builder(keys.size());
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (int[] chunk : Requests.byNamespace(keys, hello.maxFrameBytes(), Wire.HASH_BYTES + 1, i -> 0)) {
            List<StoreKey> some = subList(keys, chunk);
            parts.add(call(
                    new WriteRequest.Delete(some.getFirst().namespace(), some),
                    deadline,
                    new Answers.Statuses(chunk, out)));
        }
        return allOf(parts).thenApply(v -> out.build());
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return call(new WriteRequest.Clear(namespace), deadline, new Answers.Done("clear"));
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        return call(new WriteRequest.ClearAll(), deadline, new Answers.Done("clear-all"));
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
        Checks.requireArgument(
                pageBytes > 0 && pageBytes <= capabilities().maxPageBytes(),
                "pageBytes %d is not within 1..%d",
                pageBytes,
                capabilities().maxPageBytes());
        Checks.requireArgument(!hold.isNegative() && !hold.isZero(), "hold must be positive, was %s", hold);
        Namespace ns = keys.getFirst().namespace();
        for (StoreKey k : keys) {
            Checks.requireArgument(k.namespace().equals(ns), "a lease covers one namespace; %s is in another", k);
        }
        Checks.requireArgument(
                (long) keys.size() * (Wire.HASH_BYTES + 4 + Answers.LEASE_ANSWER_BYTES) + Requests.OVERHEAD_BYTES
                        <= hello.maxFrameBytes(),
                "%d keys do not fit one frame",
                keys.size());
        checkOpen();
        long millis = Math.min(0xFFFF_FFFFL, Math.max(1, hold.toMillis()));
        int[] lengths = new int[keys.size()];
        Arrays.fill(lengths, (int) pageBytes);
        ReadRequest.Lease lease = new ReadRequest.Lease(ns, List.copyOf(keys), lengths, millis, false);
        return connection(deadline)
                .thenCompose(c -> c.send(lease, deadline, new Reply<PageLease>() {
                    @Override
                    public PageLease answer(ByteBuf in) {
                        return PageLease.read(in, keys.size(), pageBytes, c, slab);
                    }

                    @Override
                    public PageLease noAnswer(PageStatus status, @Nullable String detail) {
                        throw new HiCacheException(
                                ErrorCode.STORE_IO, "lease of " + keys.size() + " pages: " + status + ": " + detail);
                    }
                }));
    }

    /**
     * PREFIX_HITS: per tier, the longest leading run of {@code keys} (one namespace, one frame) the daemon holds. Changes
     * no page and no recency: a router's question.
     *
     * @throws IllegalArgumentException for keys of several namespaces, or more than one frame can carry
     */
    public CompletableFuture<PrefixHits> prefixHits(List<StoreKey> keys, Deadline deadline) {
        Namespace ns = oneFrame(keys, Wire.HASH_BYTES);
        checkOpen();
        return call(new ReadRequest.PrefixHits(ns, List.copyOf(keys)), deadline, Answers.read("prefix hits", in -> {
            Codec.need(in, 13, "prefix hits answer");
            int slab = (int) Codec.readUnsignedInt(in);
            int l3 = (int) Codec.readUnsignedInt(in);
            int any = (int) Codec.readUnsignedInt(in);
            return new PrefixHits(slab, l3, any, PrefixHits.L3State.of(in.readUnsignedByte()));
        }));
    }

    /**
     * RETAIN: gives the stored pages of one chain ({@code chain}, from its first page) a retention {@code priority}
     * (0-99) that holds for {@code retention} after each use, applied last page first so that the chain's suffix goes
     * before its prefix. Completes with OK per page the daemon's host slab holds, MISS for the others.
     */
    public CompletableFuture<BatchResult> retain(
            List<StoreKey> chain, int priority, Duration retention, Deadline deadline) {
        Namespace ns = oneFrame(chain, Wire.HASH_BYTES);
        Checks.requireArgument(!retention.isNegative(), "retention must not be negative, was %s", retention);
        long millis = Math.min(0xFFFF_FFFFL, retention.toMillis());
        return statuses(
                new WriteRequest.Retain(ns, List.copyOf(chain), priority, millis, false), chain.size(), deadline);
    }

    /** RETAIN with the demote flag: the pages of {@code keys} the slab holds become the first to be evicted. */
    public CompletableFuture<BatchResult> demote(List<StoreKey> keys, Deadline deadline) {
        Namespace ns = oneFrame(keys, Wire.HASH_BYTES);
        return statuses(new WriteRequest.Retain(ns, List.copyOf(keys), 0, 0, true), keys.size(), deadline);
    }

    private CompletableFuture<BatchResult> statuses(Request request, int n, Deadline deadline) {
        checkOpen();
        BatchResult.Builder out = BatchResult.builder(n);
        int[] all = new int[n];
        Arrays.setAll(all, i -> i);
        return call(request, deadline, new Answers.Statuses(all, out)).thenApply(v -> out.build());
    }

    /** The one namespace of {@code keys}, which must fit one frame at {@code bytesPerKey}. */
    private Namespace oneFrame(List<StoreKey> keys, int bytesPerKey) {
        Checks.checkNotNull(keys, "keys");
        Checks.requireArgument(!keys.isEmpty(), "at least one key");
        Namespace ns = keys.getFirst().namespace();
        for (StoreKey k : keys) {
            Checks.requireArgument(k.namespace().equals(ns), "one namespace; %s is in another", k);
        }
        Checks.requireArgument(
                (long) keys.size() * bytesPerKey + Requests.OVERHEAD_BYTES <= hello.maxFrameBytes(),
                "%d keys do not fit one frame",
                keys.size());
        return ns;
    }

    /** The daemon's metrics, in Prometheus' text format. */
    public CompletableFuture<String> daemonMetrics(Deadline deadline) {
        checkOpen();
        return call(new AdminRequest.Stats(), deadline, Answers.read("metrics", in -> {
            int length = (int) Codec.readUnsignedInt(in);
            Codec.need(in, length, "metrics text");
            return in.readCharSequence(length, StandardCharsets.UTF_8).toString();
        }));
    }

    /** True if the daemon answers and is not shutting down. */
    public CompletableFuture<Boolean> daemonHealthy(Deadline deadline) {
        checkOpen();
        return call(new AdminRequest.Health(), deadline, new Reply<>() {
            @Override
            public Boolean answer(ByteBuf in) {
                Codec.need(in, 1, "health");
                return in.readUnsignedByte() == 0;
            }

            @Override
            public Boolean noAnswer(PageStatus status, @Nullable String detail) {
                return false;
            }
        });
    }

    /* ---------------------------------------------------------------- requests */

    /**
     * Sends {@code request} with a deadline of {@code timeout} for the daemon, waiting {@code grace} longer for its
     * answer: {@link DaemonAdmin}'s, which may work until their deadline and answer then.
     */
    <T> CompletableFuture<T> callWithin(Request request, Duration timeout, Duration grace, Reply<T> reply) {
        long millis = Math.max(1, Math.min(timeout.toMillis(), 0xFFFF_FFFFL));
        return callWith(Deadline.after(timeout.plus(grace)), millis, c -> request, reply);
    }

    /** Sends {@code request} on the next connection. */
    private <T> CompletableFuture<T> call(Request request, Deadline deadline, Reply<T> reply) {
        return callWith(deadline, -1, c -> request, reply);
    }

    /**
     * Sends the request {@code request} makes for the connection it goes on (made only once there is one), telling
     * the daemon a deadline of {@code timeoutMillis} (-1: {@code deadline}'s).
     */
    private <T> CompletableFuture<T> callWith(
            Deadline deadline, long timeoutMillis, Function<RemoteConnection, Request> request, Reply<T> reply) {
        return connection(deadline)
                .handle((c, error) -> {
                    if (error != null) {
                        Throwable cause = error.getCause() != null ? error.getCause() : error;
                        return RemoteConnection.unsent(
                                reply,
                                deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED,
                                cause.getMessage());
                    }
                    return timeoutMillis < 0
                            ? c.send(request.apply(c), deadline, reply)
                            : c.send(request.apply(c), deadline, timeoutMillis, reply);
                })
                .thenCompose(f -> f);
    }

    /** The next connection in turn, replacing it first if it broke. */
    private CompletableFuture<RemoteConnection> connection(Deadline deadline) {
        int slot = Math.floorMod(turn.getAndIncrement(), connections.length());
        while (true) {
            CompletableFuture<RemoteConnection> current = connections.get(slot);
            if (current != null
                    && (!current.isDone()
                            || (!current.isCompletedExceptionally()
                                    && current.join().isActive()))) {
                return current.isDone()
                        ? current
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

    /** The keys at {@code indices}, in order: one request's (one namespace, cut by {@link Requests}). */
    private static List<StoreKey> subList(List<StoreKey> keys, int[] indices) {
        List<StoreKey> some = new ArrayList<>(indices.length);
        for (int i : indices) {
            some.add(keys.get(i));
        }
        return some;
    }
}
