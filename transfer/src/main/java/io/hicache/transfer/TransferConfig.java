package io.hicache.transfer;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The transfer engine's settings, validated once here. Immutable; change with the {@code with...} methods.
 *
 * @param name                 the engine's (and its segment's) name, for logs and peers
 * @param bindHost             the address its listeners (control, and the TCP transport's) bind to
 * @param port                 its control listener's port; 0 picks a free one (the TCP transport always picks one)
 * @param connectionsPerPeer   TCP connections opened to each peer; slices are spread over them
 * @param sliceBytes           requests larger than this are cut into slices of this size, the unit transports move
 * @param windowBytesPerConnection bytes in flight on one TCP connection before further slices wait
 * @param ioThreads            I/O threads a transport may use: the TCP transport's event loops (this many for its
 *                             outbound links and as many for its listener), the shared-memory copy threads
 * @param shmDir               where regions that a same-host peer may map are created
 * @param sliceTimeoutMillis   a slice on the wire (or waiting for a connection) longer than this fails its connection
 * @param connectTimeoutMillis one connection attempt
 * @param heartbeatMillis      pings on the control connection; three missed pings declare a peer dead
 * @param sliceRetries         how often a slice is moved to another connection after its connection failed
 * @param transports           transport names in order of preference; the first both sides can use is taken
 * @param transportOptions     settings of individual transports, each under {@code <transport>.<key>} (the UCX
 *                             transport's {@code ucx.tls}, say); each transport reads and checks its own when the
 *                             engine creates it
 */
public record TransferConfig(
        String name,
        String bindHost,
        int port,
        int connectionsPerPeer,
        int sliceBytes,
        long windowBytesPerConnection,
        int ioThreads,
        Path shmDir,
        long sliceTimeoutMillis,
        long connectTimeoutMillis,
        long heartbeatMillis,
        int sliceRetries,
        List<String> transports,
        Map<String, String> transportOptions) {
    private static final Pattern OPTION_KEY = Pattern.compile("[a-z0-9-]+\\.[a-z0-9.-]+");

    public TransferConfig {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(bindHost, "bindHost");
        Objects.requireNonNull(shmDir, "shmDir");
        transports = List.copyOf(transports);
        transportOptions = Map.copyOf(transportOptions);
        for (String key : transportOptions.keySet()) {
            require(OPTION_KEY.matcher(key).matches(), "transport option '" + key + "' is not <transport>.<key>");
        }
        require(!name.isBlank() && name.length() <= 200, "name must be 1..200 characters");
        require(port >= 0 && port <= 65535, "port must be 0..65535, got " + port);
        require(
                connectionsPerPeer >= 1 && connectionsPerPeer <= 64,
                "connectionsPerPeer must be 1..64, got " + connectionsPerPeer);
        require(sliceBytes >= 4096 && sliceBytes <= (64 << 20), "sliceBytes must be 4 KiB..64 MiB, got " + sliceBytes);
        require(
                windowBytesPerConnection >= sliceBytes,
                "windowBytesPerConnection (" + windowBytesPerConnection + ") must be >= sliceBytes (" + sliceBytes
                        + ")");
        require(ioThreads >= 1 && ioThreads <= 256, "ioThreads must be 1..256, got " + ioThreads);
        require(sliceTimeoutMillis >= 10, "sliceTimeoutMillis must be >= 10, got " + sliceTimeoutMillis);
        require(connectTimeoutMillis >= 10, "connectTimeoutMillis must be >= 10, got " + connectTimeoutMillis);
        require(heartbeatMillis >= 10, "heartbeatMillis must be >= 10, got " + heartbeatMillis);
        require(sliceRetries >= 0 && sliceRetries <= 100, "sliceRetries must be 0..100, got " + sliceRetries);
        require(!transports.isEmpty(), "transports must name at least one transport");
    }

    /** The settings before {@code transportOptions} existed: no transport options. */
    public TransferConfig(
            String name,
            String bindHost,
            int port,
            int connectionsPerPeer,
            int sliceBytes,
            long windowBytesPerConnection,
            int ioThreads,
            Path shmDir,
            long sliceTimeoutMillis,
            long connectTimeoutMillis,
            long heartbeatMillis,
            int sliceRetries,
            List<String> transports) {
        this(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                windowBytesPerConnection,
                ioThreads,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                Map.of());
    }

    private static void require(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException("transfer: " + message);
        }
    }

    /**
     * The defaults: loopback, a free port, 4 connections per peer, 256 KiB slices, 2 I/O threads, regions in
     * {@code /dev/shm}, 10 s slice timeout, 2 s connect timeout, 1 s heartbeat, 3 retries, shared memory preferred
     * over TCP.
     */
    public static TransferConfig defaults(String name) {
        return new TransferConfig(
                name,
                "127.0.0.1",
                0,
                4,
                256 << 10,
                8L << 20,
                2,
                Path.of("/dev/shm"),
                10_000,
                2_000,
                1_000,
                3,
                List.of("shm", "tcp"));
    }

    public TransferConfig withConnectionsPerPeer(int n) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                n,
                sliceBytes,
                windowBytesPerConnection,
                ioThreads,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                transportOptions);
    }

    public TransferConfig withSliceBytes(int bytes) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                bytes,
                Math.max(windowBytesPerConnection, bytes),
                ioThreads,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                transportOptions);
    }

    public TransferConfig withWindowBytesPerConnection(long bytes) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                bytes,
                ioThreads,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                transportOptions);
    }

    public TransferConfig withIoThreads(int n) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                windowBytesPerConnection,
                n,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                transportOptions);
    }

    public TransferConfig withShmDir(Path dir) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                windowBytesPerConnection,
                ioThreads,
                dir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                transportOptions);
    }

    public TransferConfig withTimeouts(long sliceMillis, long connectMillis, long heartbeatEveryMillis) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                windowBytesPerConnection,
                ioThreads,
                shmDir,
                sliceMillis,
                connectMillis,
                heartbeatEveryMillis,
                sliceRetries,
                transports,
                transportOptions);
    }

    public TransferConfig withTransports(List<String> names) {
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                windowBytesPerConnection,
                ioThreads,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                names,
                transportOptions);
    }

    /**
     * With transport option {@code key} ({@code <transport>.<key>}) set to {@code value}, or removed when
     * {@code value} is null.
     */
    public TransferConfig withTransportOption(String key, @Nullable String value) {
        Map<String, String> options = new LinkedHashMap<>(transportOptions);
        if (value == null) {
            options.remove(key);
        } else {
            options.put(key, value);
        }
        return new TransferConfig(
                name,
                bindHost,
                port,
                connectionsPerPeer,
                sliceBytes,
                windowBytesPerConnection,
                ioThreads,
                shmDir,
                sliceTimeoutMillis,
                connectTimeoutMillis,
                heartbeatMillis,
                sliceRetries,
                transports,
                options);
    }
}
