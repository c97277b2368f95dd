package io.hicache.server.daemon;

import io.hicache.cluster.ClusterConfig;
import io.hicache.cluster.MemberRegistration;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.events.KvEventsConfig;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.RateLimitedLog;
import io.hicache.core.util.Threads;
import io.hicache.storage.remote.protocol.NettyTransport;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.flush.FlushConsolidationHandler;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * The HiCache daemon: a host tier ({@link SlabCache}) in front of an L3 page store, served over the binary protocol
 * of docs/protocol.md on Netty, with Prometheus metrics and a health endpoint over HTTP.
 *
 * <p>Threads: Netty's acceptor and event loops, {@code server.workers} request workers
 * ({@code hicache-server-worker-N}), the write-behind, the lease sweeper, the metrics endpoint and, with
 * {@code server.kv-events-config}, the KV event publisher ({@code hicache-server-kv-events}); all stop on close.
 * {@link #close()} is graceful: it stops accepting, lets requests in flight finish, closes connections, writes every
 * page not yet in L3 behind, then closes the store and frees the slab.
 *
 * <p>Thread-safe. The starter closes it.
 */
public final class HiCacheServer implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(HiCacheServer.class.getName());
    /** Where the file store keeps pages when {@code file.root} is not set: relative to the working directory. */
    public static final String DEFAULT_FILE_ROOT = "hicache-data/file";

    final ServerConfig config;
    final SlabCache cache;
    final Leases leases;
    /** The request handlers, one per family; shared by every connection. */
    final ReadHandler readHandler;

    final WriteHandler writeHandler;
    final AdminHandler adminHandler;
    final ServerMetrics metrics = new ServerMetrics();
    /** The tenants of {@code server.tenants-file}, or {@link Tenants#NONE}. */
    final Tenants tenants;
    /** TLS on every port, or null for plaintext ({@code server.tls-cert}). */
    final @Nullable Tls tls;

    final ExecutorService workers;
    final AtomicInteger inFlight = new AtomicInteger();
    /** Bytes of frames still arriving, over all connections. */
    final FrameDecoder.Budget partialFrames;

    final RateLimitedLog partialFramesLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));
    private final EventLoopGroup acceptor;
    private final EventLoopGroup loops;
    private final ChannelGroup channels = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
    private final Channel listener;
    /** The Redis protocol's listener (docs/resp.md), or null when {@code server.resp-port} is -1. */
    private final @Nullable Channel respListener;

    private final RespLengths respLengths = new RespLengths();
    /** Null when off ({@code server.metrics-port} -1). */
    private final @Nullable MetricsEndpoint endpoint;

    private final ScheduledExecutorService sweeper;
    private final AtomicBoolean closing = new AtomicBoolean();
    /** The operator's view of the L3 store: STORE requests. */
    final StoreAdmin stores;

    private final NettyTransport transport;
    /** This daemon's record in its cluster's etcd, kept alive; null when it runs alone (no cluster.etcd). */
    private volatile @Nullable MemberRegistration membership;

    private HiCacheServer(ServerConfig config, SlabCache cache) throws Exception {
        this.config = config;
        this.cache = cache;
        this.stores = new StoreAdmin(cache, config, this::port);
        this.tenants = config.tenantsFile().isEmpty()
                ? Tenants.NONE
                : Tenants.load(Path.of(config.tenantsFile()), config.authToken(), config.adminToken());
        this.tls = Tls.of(config.tls()).orElse(null);
        metrics.exportTenants(tenants, cache.space);
        metrics.export(cache);
        this.partialFrames = new FrameDecoder.Budget(config.maxPartialFrameBytes());
        this.leases = new Leases(cache.pages, cache.space, config.maxLeasesPerConnection());
        metrics.exportHeld(leases, partialFrames);
        this.readHandler = new ReadHandler(config, cache, leases);
        this.writeHandler = new WriteHandler(config, cache, leases);
        this.adminHandler = new AdminHandler(this);
        this.workers = Executors.newFixedThreadPool(config.workers(), Threads.factory("server-worker"));
        this.transport = config.transport().resolve();
        this.acceptor = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        this.loops = new MultiThreadIoEventLoopGroup(config.eventLoops(), transport.ioHandlerFactory());
        this.sweeper = Executors.newSingleThreadScheduledExecutor(r -> Threads.unstarted("server-lease-sweeper", r));
        sweeper.scheduleAtFixedRate(leases::expire, 1, 1, TimeUnit.SECONDS);
        ServerBootstrap b = listening(config).childHandler(new ChannelInitializer<SocketChannel>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                channels.add(ch);
                if (tls != null) {
                    ch.pipeline().addLast(tls.handler(ch));
                } else if (config.putIntoSlab()) {
                    // before the first read: Netty keeps the handle it makes then (PutLander.Allocator)
                    ch.config().setRecvByteBufAllocator(new PutLander.Allocator());
                }
                // Answers to a pipelined batch of requests leave in one write, not one syscall each.
                ch.pipeline()
                        .addLast(new FlushConsolidationHandler(
                                FlushConsolidationHandler.DEFAULT_EXPLICIT_FLUSH_AFTER_FLUSHES, false));
                // The declared length is checked against the limit before a byte of the frame is buffered;
                // until a HELLO is accepted the limit is a HELLO's size (HandshakeHandler widens it then).
                ch.pipeline()
                        .addLast(
                                HandshakeHandler.FRAMES,
                                new FrameDecoder(HandshakeHandler.HELLO_FRAME_BYTES, partialFrames));
                Responder out = new Responder(ch, metrics);
                ServerHandler requests = new ServerHandler(HiCacheServer.this, out);
                ch.pipeline().addLast(new HandshakeHandler(HiCacheServer.this, out, requests));
                ch.pipeline().addLast(requests);
            }
        });
        Channel bound = null;
        Channel resp = null;
        MetricsEndpoint http = null;
        try {
            bound = bind(b, config);
            resp = config.respPort() < 0 ? null : bindResp(config);
            if (config.metricsPort() >= 0) {
                try {
                    http = new MetricsEndpoint(
                            config.bind(),
                            config.metricsPort(),
                            metrics.registry,
                            () -> !closing.get(),
                            cache.health::failing,
                            cache.writeBehind::degraded,
                            tls == null ? null : tls.jdkContext(),
                            new PrefixQueryEndpoint(cache.reads, this::httpAccess));
                } catch (IOException e) {
                    throw new HiCacheException(
                            ErrorCode.CONFIG_INVALID,
                            "cannot serve metrics on " + config.bind() + ":"
                                    + config.metricsPort() + " (" + e.getMessage()
                                    + "); set server.metrics-port to a free port, 0 "
                                    + "for any free one, or -1 for none",
                            e);
                }
            }
        } catch (Exception e) {
            stopStarted(bound, resp);
            throw e;
        }
        this.listener = bound;
        this.respListener = resp;
        this.endpoint = http;
    }

    /**
     * Stops what a constructor that cannot finish had started (the caller closes the cache): the listeners bound so
     * far, the event loops, the workers and the lease sweeper, whose threads would otherwise outlive the failed start.
     */
    private void stopStarted(@Nullable Channel bound, @Nullable Channel resp) {
        for (Channel c : new Channel[] {bound, resp}) {
            if (c != null) {
                c.close().awaitUninterruptibly();
            }
        }
        sweeper.shutdownNow();
        workers.shutdownNow();
        loops.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
        acceptor.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
    }

    /**
     * Registers a listener, gives it {@code server.tcp-congestion} before it can accept anything (accepted connections
     * take the listener's choice: the kernel copies it to each child socket), then binds it to {@code port}.
     */
    private static Channel listen(ServerBootstrap b, ServerConfig config, int port) throws Exception {
        Channel ch = b.register().sync().channel();
        try {
            if (!config.tcpCongestion().isEmpty()) {
                TcpCongestion.set(ch, config.tcpCongestion());
            }
            ch.bind(new InetSocketAddress(config.bind(), port)).sync();
            return ch;
        } catch (Exception e) {
            ch.close().awaitUninterruptibly();
            throw e;
        }
    }

    /** A listener on the daemon's event loops with its socket options: both protocols' listeners are made so. */
    private ServerBootstrap listening(ServerConfig config) {
        return new ServerBootstrap()
                .group(acceptor, loops)
                .channel(transport.serverChannel())
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, waterMark(config.maxInFlightBytes()));
    }

    /** Binds the Redis protocol's port, on the same event loops as the binary protocol. */
    private Channel bindResp(ServerConfig config) {
        ServerBootstrap b = listening(config).childHandler(new ChannelInitializer<SocketChannel>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                channels.add(ch);
                ch.closeFuture().addListener(f -> metrics.connections.decrementAndGet());
                if (metrics.connections.incrementAndGet() > config.maxConnections()) {
                    ch.close(); // server.max-connections counts both protocols' connections
                    return;
                }
                if (tls != null) {
                    ch.pipeline().addLast(tls.handler(ch));
                }
                ch.pipeline()
                        .addLast(new FlushConsolidationHandler(
                                FlushConsolidationHandler.DEFAULT_EXPLICIT_FLUSH_AFTER_FLUSHES, false));
                ch.pipeline().addLast(new RespDecoder(Math.max(config.maxPageBytes(), 64 * 1024)));
                ch.pipeline().addLast(new RespHandler(HiCacheServer.this, respLengths));
            }
        });
        try {
            return listen(b, config, config.respPort());
        } catch (HiCacheException e) {
            throw e;
        } catch (Exception e) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "cannot serve the Redis protocol on " + config.bind() + ":" + config.respPort()
                            + " (server.resp-port): " + e.getMessage() + "; give it a free port, 0 for any, or -1 for "
                            + "none",
                    e);
        }
    }

    /** The connections open now, both protocols' (for tests). */
    ChannelGroup openConnections() {
        return channels;
    }

    /** The Redis protocol's port, or -1 when it is off. */
    public int respPort() {
        Channel ch = respListener;
        return ch == null ? -1 : ((InetSocketAddress) ch.localAddress()).getPort();
    }

    /** Binds the protocol port; a port in use or an address not of this host is said in words, with the setting. */
    private static Channel bind(ServerBootstrap b, ServerConfig config) throws Exception {
        try {
            return listen(b, config, config.port());
        } catch (Exception e) {
            // Netty's native transport throws its own IOException types, whose text carries the OS's.
            String text = String.valueOf(e.getMessage());
            if (e instanceof BindException || text.contains("Address already in use")) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        "port " + config.port() + " on " + config.bind()
                                + " (server.port) is in use by another program "
                                + "or daemon; stop that one, or give this daemon another port (--server.port N, "
                                + "or --port N; 0 takes any free one)",
                        e);
            }
            if (text.contains("Cannot assign requested address")) {
                throw new HiCacheException(
                        ErrorCode.CONFIG_INVALID,
                        "server.bind " + config.bind() + " is not an address of this host; use 127.0.0.1 (this host "
                                + "only), an address of one of its interfaces, or 0.0.0.0 (all of them)",
                        e);
            }
            throw e;
        }
    }

    /**
     * Starts a daemon: the slab, the L3 store, the listener and the metrics endpoint, logging what it chose.
     *
     * @throws HiCacheException when a part cannot start (the parts already started are stopped)
     */
    public static HiCacheServer start(ServerConfig config) {
        return start(config, null);
    }

    /**
     * As {@link #start(ServerConfig)}, publishing KV events to {@code kvEvents} instead of the publisher
     * {@code server.kv-events-config} names (null: that one, or none): for a consumer in the same process. The daemon
     * takes ownership of it and closes it, also when starting fails; its queue holds the config's
     * {@code max_queue_size} events.
     */
    public static HiCacheServer start(ServerConfig config, @Nullable KvEventPublisher kvEvents) {
        Optional<PageStore> store = Optional.empty();
        SlabCache cache = null;
        KvEventSink sink = null;
        try {
            sink = kvEvents != null
                    ? KvEventSink.over(
                            "server-kv-events", kvEvents, config.kvEvents().maxQueueEvents())
                    : KvEventSink.open("server-kv-events", eventsOf(config));
            if (!config.store().isEmpty()) {
                store = Optional.of(StoreAdmin.open(config, config.store(), Map.of()));
            }
            cache = new SlabCache(config, store, sink); // from here the slab cache owns the store and the sink
            HiCacheServer server = new HiCacheServer(config, cache);
            if (ClusterConfig.requested(config.settings())) {
                try {
                    ClusterConfig cluster = ClusterConfig.from(config.settings());
                    MemberRegistration m = MemberRegistration.start(
                            cluster,
                            ClusterConfig.self(config.settings(), config.bind(), server.port(), config.hostBytes()));
                    server.membership = m;
                    server.metrics.exportCluster(cluster.name(), m.self().id(), m::registered);
                } catch (RuntimeException e) {
                    server.close();
                    throw e;
                }
            }
            LOG.log(Level.DEBUG, server::describe); // the caller prints describe() where its users look
            return server;
        } catch (Exception e) {
            if (cache != null) {
                cache.close(); // its store and sink too
            } else {
                store.ifPresent(PageStore::close);
                if (sink != null) {
                    sink.close();
                } else if (kvEvents != null) {
                    kvEvents.close();
                }
            }
            if (e instanceof HiCacheException h) {
                throw h;
            }
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "the daemon could not start: " + e, e);
        }
    }

    /**
     * The KV events' configuration: a cluster member's events carry its id as their topic (when none is set and the id
     * is known before the port is bound: {@code cluster.member-id}, or a fixed {@code server.port}), so that a router
     * subscribed to every member tells them apart.
     */
    static KvEventsConfig eventsOf(ServerConfig config) {
        KvEventsConfig events = config.kvEventsPublished();
        if (!events.enabled() || !events.topic().isEmpty() || !ClusterConfig.requested(config.settings())) {
            return events;
        }
        return ClusterConfig.memberIdBeforeBinding(config.settings(), config.bind(), config.port())
                .map(events::withTopic)
                .orElse(events);
    }

    /** What the start line says of the connections' congestion control: the one set, or a hint where BBR paces. */
    private String congestionText() {
        if (!config.tcpCongestion().isEmpty()) {
            return " with TCP congestion control " + config.tcpCongestion();
        }
        return transport == NettyTransport.EPOLL
                        && TcpCongestion.systemDefault().filter("bbr"::equals).isPresent()
                ? " (the system's TCP congestion control bbr paces every send, even on loopback: "
                        + "server.tcp-congestion cubic avoids that)"
                : "";
    }

    /** One line saying what it runs: address, slab, store, limits, threads. */
    public String describe() {
        return "HiCache daemon on " + config.bind() + ":" + port() + " (protocols "
                + Wire.VERSION + " to " + Wire.VERSION_3
                + (config.authToken().isEmpty() ? ", no auth token" : ", auth token required")
                + (tenants.any() ? ", tenants " + String.join(" ", tenants.names()) : "")
                + (tls == null
                        ? ", plaintext"
                        : ", TLS by " + tls.provider()
                                + (config.tls().clientCa().isEmpty() ? "" : " with client certificates"))
                + (respPort() >= 0 ? "; Redis protocol on port " + respPort() : "")
                + (config.adminToken().isEmpty()
                        ? ", admin operations from loopback only"
                        : ", admin token required for " + "admin operations")
                + "); host slab "
                + Units.formatBytes(cache.space.slabBytes()) + " at " + cache.space.file() + "; L3 store: "
                + stores.show().map(s -> s.name() + " at " + s.location()).orElse("none")
                + "; pages up to " + Units.formatBytes(config.maxPageBytes()) + "; " + config.eventLoops()
                + (config.eventLoops() == 1 ? " event loop, " : " event loops, ") + config.workers()
                + " workers; transport "
                + transport.describe(config.transport())
                + congestionText()
                + "; metrics: "
                + (endpoint == null
                        ? "off"
                        : (tls == null ? "http://" : "https://") + config.bind() + ":" + endpoint.port() + "/metrics")
                + "; KV events: " + describeEvents(config.kvEventsPublished())
                + describeCluster();
    }

    private String describeCluster() {
        MemberRegistration m = membership;
        return m == null
                ? ""
                : "; cluster member " + m.self().id()
                        + (m.registered() ? "" : " (not registered yet: etcd does not answer)");
    }

    private static String describeEvents(KvEventsConfig events) {
        if (!events.enabled()) {
            return "off";
        }
        return events.endpoint()
                + events.bindHost()
                        .map(h -> " (wildcard host bound to " + h + ")")
                        .orElse("");
    }

    /** The socket transport the daemon runs on: {@code server.transport} resolved (never {@code AUTO}). */
    public NettyTransport transport() {
        return transport;
    }

    /**
     * What an HTTP request with bearer token {@code token} (null: none) may ask about: as a HELLO with that token
     * would; a daemon without any token answers everyone (it serves loopback only).
     */
    Optional<Tenants.Access> httpAccess(@Nullable String token) {
        byte[] given = (token == null ? "" : token).getBytes(StandardCharsets.UTF_8);
        String admin = config.adminToken();
        if (!admin.isEmpty() && MessageDigest.isEqual(given, admin.getBytes(StandardCharsets.UTF_8))) {
            return Optional.of(tenants.everything());
        }
        String tenant = tenants.tenantOf(given);
        if (tenant != null) {
            return Optional.of(Tenants.tenant(tenant));
        }
        if (MessageDigest.isEqual(given, config.authToken().getBytes(StandardCharsets.UTF_8))) {
            return Optional.of(tenants.shared());
        }
        return Optional.empty();
    }

    /** The port the daemon listens on. */
    public int port() {
        return ((InetSocketAddress) listener.localAddress()).getPort();
    }

    /** Pages in the slab not yet written to the L3 store: what a graceful shutdown still has to drain. */
    public int pendingWriteBehindPages() {
        return cache.writeBehind.pendingPages();
    }

    /** The metrics endpoint's port, or -1 when off. */
    public int metricsPort() {
        return endpoint == null ? -1 : endpoint.port();
    }

    boolean shuttingDown() {
        return closing.get();
    }

    /** Graceful shutdown (see the class comment); waits at most {@code server.shutdown-timeout} for each stage. */
    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        long timeoutMillis = config.shutdownTimeout().toMillis();
        MemberRegistration m = membership;
        if (m != null) {
            m.close(); // leave the cluster first: clients stop sending here while requests in flight finish
        }
        listener.close().awaitUninterruptibly(timeoutMillis);
        if (respListener != null) {
            respListener.close().awaitUninterruptibly(timeoutMillis);
        }
        long end = System.currentTimeMillis() + timeoutMillis;
        while (inFlight.get() > 0 && System.currentTimeMillis() < end) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        channels.close().awaitUninterruptibly(timeoutMillis);
        loops.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(timeoutMillis);
        acceptor.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(timeoutMillis);
        workers.shutdown();
        try {
            workers.awaitTermination(timeoutMillis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        sweeper.shutdownNow();
        if (endpoint != null) {
            endpoint.close();
        }
        cache.close();
        LOG.log(Level.INFO, "HiCache daemon stopped");
    }

    /** Unwritable above the in-flight limit, writable again below half of it (Netty wants a low mark of 1 or more). */
    private static WriteBufferWaterMark waterMark(long maxInFlightBytes) {
        int high = (int) Math.min(Integer.MAX_VALUE, Math.max(2, maxInFlightBytes));
        return new WriteBufferWaterMark(Math.max(1, high / 2), high);
    }
}
