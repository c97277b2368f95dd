package io.hicache.server.daemon;

import io.hicache.cluster.ClusterConfig;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.events.KvEventsConfig;
import io.hicache.core.store.PageStores;
import io.hicache.core.util.Checks;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.NettyTransport;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;

/**
 * The daemon's configuration, read and checked once. Its L3 store reads its own settings ({@code file.root}, ...)
 * from the same {@link #settings()}.
 *
 * @param bind              the address to listen on
 * @param port              the port (0: any free one)
 * @param authToken         the token clients must present; required when {@code bind} is not a loopback address
 * @param adminToken        the token a connection's HELLO carries for admin operations (FLUSH, STORE DETACH and
 *                          ATTACH, CLEAR_ALL); empty: admin operations are accepted from loopback peers only
 * @param storeRoot         the folder under which STORE ATTACH may place the folders it names (absolute)
 * @param maxLeasesPerConnection leases and reservations one connection may hold at once
 * @param maxConnections    open connections at most
 * @param maxFrameBytes     the largest frame accepted (its declared length, which does not count the length field);
 *                          a declared length above it closes the connection unread
 * @param maxPageBytes      the largest page stored
 * @param maxInFlightBytes  bytes one connection may have in progress (requests being worked on, answers not yet
 *                          sent) before the daemon stops reading from it
 * @param hostDir           where the host slab lives (a tmpfs)
 * @param hostBytes         the host slab's size
 * @param minBlockBytes     the smallest block the slab allocator hands out
 * @param store             the L3 store's name, or empty for none
 * @param namespaceQuota    the most host bytes one namespace may hold (0: no quota)
 * @param metricsPort       the Prometheus endpoint's port on {@code bind} (0: any free one, -1: off)
 * @param ioThreads         event loop threads that read, parse and answer requests (0: one per two cores)
 * @param workers           threads that run requests needing the store or eviction
 * @param shutdownTimeout   how long a graceful shutdown waits for requests in flight and the write-behind
 * @param maxLease          the longest lease a same-host client may hold
 * @param handshakeTimeout  how long a connection may stay without a HELLO before it is closed (its slot freed)
 * @param maxPartialFrameBytes bytes of frames still arriving that all connections together may hold
 * @param writeBehindMaxTries tries to write a page behind before it is given up (logged and reported)
 * @param kvEvents          where the daemon publishes KV events ({@code server.kv-events-config}, SGLang's
 *                          {@code --kv-events-config} JSON); off by default
 * @param transport         Netty's socket transport ({@code auto}: epoll where its native library loads, NIO otherwise)
 * @param settings          all the raw settings, for the L3 store
 */
public record ServerConfig(
        String bind,
        int port,
        String authToken,
        String adminToken,
        Path storeRoot,
        int maxLeasesPerConnection,
        int maxConnections,
        int maxFrameBytes,
        int maxPageBytes,
        long maxInFlightBytes,
        Path hostDir,
        long hostBytes,
        long minBlockBytes,
        String store,
        long namespaceQuota,
        int metricsPort,
        int ioThreads,
        int workers,
        Duration shutdownTimeout,
        Duration maxLease,
        Duration handshakeTimeout,
        long maxPartialFrameBytes,
        int writeBehindMaxTries,
        KvEventsConfig kvEvents,
        NettyTransport transport,
        Settings settings) {
    public static final Setting<String> BIND = Setting.string(
            "server.bind", "127.0.0.1", "the address to listen on; anything but loopback requires server.auth-token");
    public static final Setting<Integer> PORT =
            Setting.integer("server.port", 7370, 0, 65535, "the port (0: any free one)");
    public static final Setting<String> AUTH_TOKEN = Setting.string(
            "server.auth-token", "", "the token clients must present; required when listening beyond loopback");
    public static final Setting<String> ADMIN_TOKEN = Setting.string(
            "server.admin-token",
            "",
            "the token a client's HELLO must carry for admin operations (FLUSH, STORE DETACH and ATTACH, CLEAR_ALL; "
                    + "such a connection may do everything else too); unset: admin operations are accepted only from "
                    + "loopback peers, and refused (ERROR AUTH) from any other address");
    public static final Setting<Path> STORE_ROOT = Setting.path(
            "server.store-root",
            null,
            "the folder under which STORE ATTACH (hicache admin store attach) may place the folders it names "
                    + "(file.root, rocksdb.root, nixl.dirs); one outside it is refused. Unset: the folder that holds "
                    + "the daemon's own store folder (the parent of file.root, or of rocksdb.root with server.store "
                    + "rocksdb)");
    public static final Setting<Integer> MAX_LEASES_PER_CONNECTION = Setting.integer(
            "server.max-leases-per-connection",
            65_536,
            1,
            1 << 24,
            "leases and reservations (LEASE, RESERVE) one connection may hold at once; past it a "
                    + "LEASE or RESERVE takes nothing and answers its pages REJECTED (GET or PUT them instead)");
    public static final Setting<Integer> MAX_CONNECTIONS =
            Setting.integer("server.max-connections", 1024, 1, 1 << 20, "open connections at most");
    public static final Setting<Long> MAX_FRAME = Setting.bytes(
            "server.max-frame-bytes",
            "68MiB",
            "the largest frame accepted; a larger declared length closes the connection before anything is read");
    public static final Setting<Long> MAX_PAGE =
            Setting.bytes("server.max-page-bytes", "16MiB", "the largest page stored");
    public static final Setting<Long> MAX_IN_FLIGHT = Setting.bytes(
            "server.max-in-flight-bytes",
            "128MiB",
            "bytes one connection may have in progress (requests being worked on, answers not yet sent) before the daemon "
                    + "stops reading from it");
    public static final Setting<Path> HOST_DIR =
            Setting.path("server.host-dir", "/dev/shm", "folder of the host slab (a tmpfs)");
    public static final Setting<Long> HOST_SIZE = Setting.bytes("server.host-size", "1GiB", "the host slab's size");
    public static final Setting<Long> MIN_BLOCK =
            Setting.bytes("server.min-block-bytes", "4KiB", "the smallest block of the host slab's allocator");
    public static final Setting<String> STORE = Setting.string(
            "server.store",
            "file",
            "the L3 page store behind the host slab (file, rocksdb, s3, remote, ...); none for no L3");
    public static final Setting<Long> NAMESPACE_QUOTA =
            Setting.bytes("server.namespace-quota", "0", "the most host bytes one namespace may hold; 0 for no quota");
    public static final Setting<Integer> METRICS_PORT = Setting.integer(
            "server.metrics-port",
            9464,
            -1,
            65535,
            "the port of the Prometheus and health endpoint on server.bind (0: any free one, -1: off)");
    public static final Setting<Integer> IO_THREADS = Setting.integer(
            "server.io-threads",
            0,
            0,
            1024,
            "event loop threads that read, parse and answer requests; 0 for one per two cores (the kernel's TCP work "
                    + "needs the others)");
    public static final Setting<Integer> WORKERS =
            Setting.integer("server.workers", 4, 1, 1024, "threads that run requests needing the L3 store or eviction");
    public static final Setting<Duration> SHUTDOWN_TIMEOUT = Setting.duration(
            "server.shutdown-timeout",
            "30s",
            "how long a graceful shutdown waits for requests in flight and the write-behind");
    public static final Setting<Duration> MAX_LEASE =
            Setting.duration("server.max-lease", "60s", "the longest lease a same-host client may hold on pages");
    public static final Setting<Duration> HANDSHAKE_TIMEOUT = Setting.duration(
            "server.handshake-timeout",
            "5s",
            "how long a new connection may go without a HELLO before the daemon closes it and frees its slot");
    public static final Setting<Long> MAX_PARTIAL_FRAMES = Setting.bytes(
            "server.max-partial-frame-bytes",
            "512MiB",
            "bytes of frames still arriving that all connections together may hold; a frame that would go over is "
                    + "refused (ERROR BUSY) and its connection closed");
    public static final Setting<Integer> WRITE_BEHIND_MAX_TRIES = Setting.integer(
            "server.write-behind-max-tries",
            10,
            1,
            1_000,
            "tries to write a page behind to L3 (with backoff) before it is given up, logged and reported");

    public static final Setting<Integer> RESP_PORT = Setting.integer(
            "server.resp-port",
            -1,
            -1,
            65535,
            "the port of the Redis protocol (RESP2/RESP3; docs/resp.md) on server.bind, over the same slab, L3, auth "
                    + "and metrics (-1: off; 0: any free one)");
    public static final Setting<Boolean> PUT_INTO_SLAB = Setting.bool(
            "server.put-into-slab",
            true,
            "receive the bodies of a PUT's pages of 16 KiB or more straight into their room in the host slab (the "
                    + "socket's reads land there; no copy through a frame buffer), on connections without TLS; false: "
                    + "every frame is buffered whole first, then copied into the slab (docs/benchmarks.md, server: "
                    + "10-25% more put throughput with it on the development machine)");
    public static final Setting<Boolean> HOST_KEEP = Setting.bool(
            "server.host-keep",
            false,
            "keep the host slab and its index when the daemon stops gracefully, so that the next daemon started with "
                    + "the same server.host-dir and server.host-size serves its pages at once (a warm restart; each "
                    + "page's checksum is checked as it is taken back). A daemon that is killed leaves no index: its "
                    + "slab is removed at the next start as before");

    public static final Setting<String> TENANTS_FILE = Setting.string(
            "server.tenants-file",
            "",
            "a file of tenants, one `name token` a line (docs/security.md): a connection presenting a tenant's token "
                    + "(or a TLS client certificate whose common name is the tenant's) reaches that tenant's namespaces "
                    + "only; empty: no tenants");
    public static final Setting<Long> TENANT_QUOTA = Setting.bytes(
            "server.tenant-quota",
            "0",
            "the most host-slab bytes one tenant's namespaces may hold together (0: no limit); a put over it evicts "
                    + "the tenant's own pages first, as a namespace quota does");
    public static final Setting<String> TLS_CERT = Setting.string(
            "server.tls-cert",
            "",
            "a PEM certificate chain: with server.tls-key, the protocol port, the Redis port and the metrics port "
                    + "speak TLS only (docs/security.md); empty: plaintext");
    public static final Setting<String> TLS_KEY =
            Setting.string("server.tls-key", "", "the PEM private key (PKCS#8) of server.tls-cert");
    public static final Setting<String> TLS_CLIENT_CA = Setting.string(
            "server.tls-client-ca",
            "",
            "PEM certificates of the authorities whose client certificates are accepted: with it set, every TLS "
                    + "client must present one, and one whose subject's common name is a tenant's name is that tenant");

    public static final Setting<KvEventsConfig> KV_EVENTS = KvEventsConfig.setting(
            "server.kv-events-config",
            "SGLang's --kv-events-config JSON, e.g. {\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\"}: where the "
                    + "daemon publishes the pages it stores, writes behind, evicts and clears (docs/kv-events.md); "
                    + "empty: off");

    public static final Setting<NettyTransport> TRANSPORT = Setting.choice(
            "server.transport",
            NettyTransport.class,
            NettyTransport::configName,
            NettyTransport.AUTO,
            "Netty's socket transport: auto (epoll where its native library loads, nio otherwise; the start line says "
                    + "which), nio or epoll (fails to start where epoll does not load)");

    public static final Setting<String> TCP_CONGESTION = Setting.string(
            "server.tcp-congestion",
            "",
            "the TCP congestion control of the daemon's connections (Linux, epoll transport), e.g. cubic; empty: the "
                    + "system's (net.ipv4.tcp_congestion_control). BBR paces every send with a timer, which costs the "
                    + "daemon CPU on loopback for nothing (measured there: docs/benchmarks.md; not measured across "
                    + "hosts); the name must be in net.ipv4.tcp_allowed_congestion_control unless the daemon has CAP_NET_ADMIN");

    /** How much larger than the largest page a frame must be allowed to be: a request's header, namespace and keys. */
    static final int FRAME_SLACK_BYTES = 64 * 1024;

    /** The event loop threads to start: {@link #ioThreads()}, or one per two cores. */
    public int eventLoops() {
        return ioThreads > 0 ? ioThreads : Math.max(1, Runtime.getRuntime().availableProcessors() / 2);
    }

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS = Stream.concat(
                    Stream.of(
                            BIND,
                            PORT,
                            AUTH_TOKEN,
                            ADMIN_TOKEN,
                            STORE_ROOT,
                            MAX_LEASES_PER_CONNECTION,
                            MAX_CONNECTIONS,
                            MAX_FRAME,
                            MAX_PAGE,
                            MAX_IN_FLIGHT,
                            HOST_DIR,
                            HOST_SIZE,
                            MIN_BLOCK,
                            STORE,
                            NAMESPACE_QUOTA,
                            METRICS_PORT,
                            IO_THREADS,
                            WORKERS,
                            SHUTDOWN_TIMEOUT,
                            MAX_LEASE,
                            HANDSHAKE_TIMEOUT,
                            MAX_PARTIAL_FRAMES,
                            WRITE_BEHIND_MAX_TRIES,
                            HOST_KEEP,
                            PUT_INTO_SLAB,
                            RESP_PORT,
                            TENANTS_FILE,
                            TENANT_QUOTA,
                            TLS_CERT,
                            TLS_KEY,
                            TLS_CLIENT_CA,
                            KV_EVENTS,
                            TRANSPORT,
                            TCP_CONGESTION),
                    ClusterConfig.DAEMON_SETTINGS.stream()) // a daemon joins a cluster with cluster.etcd set
            .toList();

    public ServerConfig {
        Checks.requireArgument(
                handshakeTimeout.toMillis() > 0, "server.handshake-timeout must be positive, was %s", handshakeTimeout);
        Checks.requireArgument(
                maxPartialFrameBytes > 0,
                "server.max-partial-frame-bytes must be positive, was %d",
                maxPartialFrameBytes);
        Checks.requireArgument(
                maxFrameBytes >= maxPageBytes + FRAME_SLACK_BYTES,
                "server.max-frame-bytes (%d) must exceed "
                        + "server.max-page-bytes (%d) by at least %d bytes, for a page's request",
                maxFrameBytes,
                maxPageBytes,
                FRAME_SLACK_BYTES);
        Checks.requireArgument(
                Long.bitCount(minBlockBytes) == 1 && minBlockBytes >= 512,
                "server.min-block-bytes must be a power of two of at least 512, was %d",
                minBlockBytes);
        Checks.requireArgument(
                hostBytes >= maxBlockBytes(maxPageBytes, minBlockBytes),
                "server.host-size (%d) must hold at least one block of the largest page (%d)",
                hostBytes,
                maxBlockBytes(maxPageBytes, minBlockBytes));
        if (!isLoopback(bind)) {
            Checks.requireArgument(
                    !authToken.isBlank(),
                    "server.bind %s is not a loopback address: set server.auth-token, which clients must then present",
                    bind);
        }
        Checks.requireArgument(
                adminToken.isEmpty() || !adminToken.equals(authToken),
                "server.admin-token must differ from server.auth-token (else every client could run admin operations)");
        Checks.requireArgument(
                adminToken.getBytes(StandardCharsets.UTF_8).length <= MAX_TOKEN_BYTES
                        && authToken.getBytes(StandardCharsets.UTF_8).length <= MAX_TOKEN_BYTES,
                "server.auth-token and server.admin-token may have at most %d bytes (a HELLO carries them)",
                MAX_TOKEN_BYTES);
        Checks.requireArgument(storeRoot.isAbsolute(), "server.store-root must be absolute here, was %s", storeRoot);
    }

    /** The longest token a HELLO can carry: a protocol string. */
    static final int MAX_TOKEN_BYTES = Codec.MAX_STRING_BYTES;

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static ServerConfig from(Settings settings) {
        return settings.read(s -> {
            long frame = s.get(MAX_FRAME);
            long page = s.get(MAX_PAGE);
            // A frame of max-frame-bytes plus its 4-byte length field must fit an int.
            Checks.requireArgument(
                    frame <= Integer.MAX_VALUE - 4 && page <= Integer.MAX_VALUE,
                    "server.max-frame-bytes and server.max-page-bytes must be below 2GiB");
            String congestion = s.get(TCP_CONGESTION).trim();
            Checks.requireArgument(
                    congestion.matches("[A-Za-z0-9_-]{0,15}"),
                    "server.tcp-congestion must be a congestion control's name (at most 15 letters, digits, _ or -), "
                            + "was %s",
                    congestion);
            String store = s.get(STORE).trim();
            Path storeRoot = STORE_ROOT
                    .find(s)
                    .orElseGet(() -> defaultStoreRoot(s, store))
                    .toAbsolutePath()
                    .normalize();
            return new ServerConfig(
                    s.get(BIND).trim(),
                    s.get(PORT),
                    s.get(AUTH_TOKEN),
                    s.get(ADMIN_TOKEN),
                    storeRoot,
                    s.get(MAX_LEASES_PER_CONNECTION),
                    s.get(MAX_CONNECTIONS),
                    (int) frame,
                    (int) page,
                    s.get(MAX_IN_FLIGHT),
                    s.get(HOST_DIR),
                    s.get(HOST_SIZE),
                    s.get(MIN_BLOCK),
                    store.equals("none") ? "" : store,
                    s.get(NAMESPACE_QUOTA),
                    s.get(METRICS_PORT),
                    s.get(IO_THREADS),
                    s.get(WORKERS),
                    s.get(SHUTDOWN_TIMEOUT),
                    s.get(MAX_LEASE),
                    s.get(HANDSHAKE_TIMEOUT),
                    s.get(MAX_PARTIAL_FRAMES),
                    s.get(WRITE_BEHIND_MAX_TRIES),
                    s.get(KV_EVENTS),
                    s.get(TRANSPORT),
                    s);
        });
    }

    /**
     * {@code server.store-root} when it is not set: the folder that holds the daemon's own store folder, so that an
     * operator may attach a store beside the one the daemon started with (a store's own folder would only let the
     * same store be attached again: the file store refuses a root inside another's). The daemon's own folder is the
     * first folder setting of its store ({@code file.root}, {@code rocksdb.root}), as given or by default; for a store
     * without one (s3, remote, none) it is the file store's, {@code file.root} (by default
     * {@link HiCacheServer#DEFAULT_FILE_ROOT}: the root is then {@code ./hicache-data}).
     */
    static Path defaultStoreRoot(Settings settings, String store) {
        Setting<?> folder = PageStores.find(store).stream()
                .flatMap(p -> p.settings().stream())
                .filter(s -> s.type().equals("path"))
                .findFirst()
                .orElse(null);
        String key = folder != null ? folder.key() : "file.root";
        String fallback = folder == null || key.equals("file.root")
                ? HiCacheServer.DEFAULT_FILE_ROOT
                : folder.defaultText().orElse(HiCacheServer.DEFAULT_FILE_ROOT);
        Path own = Path.of(settings.lookup(key).map(v -> v.text().trim()).orElse(fallback))
                .toAbsolutePath()
                .normalize();
        return own.getParent() != null ? own.getParent() : own;
    }

    /** The slab allocator's largest block: the smallest power of two of blocks that holds the largest page. */
    static long maxBlockBytes(long maxPageBytes, long minBlockBytes) {
        long b = minBlockBytes;
        while (b < maxPageBytes) {
            b <<= 1;
        }
        return b;
    }

    /** {@link #RESP_PORT}: -1 when the Redis protocol is off. */
    public int respPort() {
        return settings.get(RESP_PORT);
    }

    /** {@link #TCP_CONGESTION}: empty for the system's default. */
    public String tcpCongestion() {
        return settings.get(TCP_CONGESTION).trim();
    }

    /** {@link #TENANTS_FILE}: empty when there are no tenants. */
    public String tenantsFile() {
        return settings.get(TENANTS_FILE).trim();
    }

    /** {@link #TENANT_QUOTA}: 0 for none. */
    public long tenantQuota() {
        return settings.get(TENANT_QUOTA);
    }

    /** {@link #TLS_CERT}, {@link #TLS_KEY} and {@link #TLS_CLIENT_CA}: where TLS's files are (empty: not used). */
    public TlsFiles tls() {
        return new TlsFiles(
                settings.get(TLS_CERT).trim(),
                settings.get(TLS_KEY).trim(),
                settings.get(TLS_CLIENT_CA).trim());
    }

    /**
     * The daemon's TLS files.
     *
     * @param cert     a PEM certificate chain, empty for plaintext
     * @param key      its PEM private key
     * @param clientCa PEM authorities of client certificates, empty to ask for none
     */
    public record TlsFiles(String cert, String key, String clientCa) {
        /** Whether TLS is on. */
        public boolean on() {
            return !cert.isEmpty();
        }
    }

    /** {@code server.put-into-slab}: whether PUT bodies are received straight into slab rooms ({@link PutLander}). */
    public boolean putIntoSlab() {
        return settings.get(PUT_INTO_SLAB);
    }

    /** {@code server.host-keep}: whether a graceful stop keeps the slab and its index for the next start. */
    public boolean hostKeep() {
        return settings.get(HOST_KEEP);
    }

    /**
     * The KV events configuration the daemon publishes with: {@link #kvEvents()}, with its wildcard host
     * ({@code tcp://*:5557}) bound to the daemon's own loopback address when the daemon serves loopback only and the
     * JSON names no {@code bind_host}: events say which prompts were cached, so they stay where the cache does.
     */
    KvEventsConfig kvEventsPublished() {
        if (!kvEvents.enabled() || kvEvents.bindHost().isPresent() || !isLoopback(bind)) {
            return kvEvents;
        }
        try {
            return kvEvents.withBindHost(InetAddress.getByName(bind).getHostAddress());
        } catch (UnknownHostException e) {
            return kvEvents; // isLoopback resolved it a moment ago
        }
    }

    static boolean isLoopback(String host) {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }
}
