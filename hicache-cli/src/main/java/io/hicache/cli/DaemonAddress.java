package io.hicache.cli;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.storage.remote.ClientTls;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Option;

/**
 * Where a running daemon is, as options shared by the commands that talk to one ({@code stats}, {@code top}): host,
 * port and token, defaulting to the daemon's own settings from the environment. A picocli mixin; filled once.
 */
final class DaemonAddress {
    @Option(
            names = "--host",
            paramLabel = "HOST",
            defaultValue = "127.0.0.1",
            description = "the daemon's address (default ${DEFAULT-VALUE})")
    String host;

    @Option(
            names = "--port",
            paramLabel = "N",
            defaultValue = "${env:HICACHE_SERVER_PORT:-7370}",
            description = "the daemon's port (default ${DEFAULT-VALUE}: HICACHE_SERVER_PORT, else 7370)")
    int port;

    @Option(
            names = "--auth-token",
            paramLabel = "TEXT",
            defaultValue = "${env:HICACHE_SERVER_AUTH_TOKEN:-}",
            description = "the daemon's token (default: HICACHE_SERVER_AUTH_TOKEN, else none)")
    String authToken;

    @Option(
            names = "--tls",
            defaultValue = "${env:HICACHE_TLS:-false}",
            description = "speak TLS to a daemon with server.tls-cert, trusting the JDK's authorities unless --tls-ca "
                    + "names others (default: HICACHE_TLS, else false; --tls-ca or --tls-cert imply it)")
    boolean tls;

    @Option(
            names = "--tls-ca",
            paramLabel = "FILE",
            defaultValue = "${env:HICACHE_TLS_CA:-}",
            description = "speak TLS to a daemon with server.tls-cert, trusting these PEM authorities (default: "
                    + "HICACHE_TLS_CA, else plaintext)")
    String tlsCa;

    @Option(
            names = "--tls-cert",
            paramLabel = "FILE",
            defaultValue = "${env:HICACHE_TLS_CERT:-}",
            description = "a PEM client certificate, for a daemon with server.tls-client-ca (with --tls-key)")
    String tlsCert;

    @Option(
            names = "--tls-key",
            paramLabel = "FILE",
            defaultValue = "${env:HICACHE_TLS_KEY:-}",
            description = "the PEM (PKCS#8) key of --tls-cert")
    String tlsKey;

    /** Connects; the caller closes the client. */
    RemotePageStore connect() {
        return connect(authToken);
    }

    /**
     * Connects with {@code token} in the HELLO instead of {@link #authToken}; the caller closes the client. A port that
     * answers HTTP instead (the daemon's metrics port, a common slip) is said to be one.
     */
    RemotePageStore connect(String token) {
        try {
            RemoteStoreConfig config = new RemoteStoreConfig(host, port, token, 1, HANDSHAKE_WAIT);
            if (tls || !tlsCa.isEmpty() || !tlsCert.isEmpty()) {
                config = config.withTls(new ClientTls(true, tlsCa, tlsCert, tlsKey));
            }
            return RemotePageStore.open(config);
        } catch (HiCacheException e) {
            if (speaksHttp(host, port)) {
                throw new HiCacheException(
                        ErrorCode.STORE_UNAVAILABLE,
                        host + ":" + port + " answers HTTP: that is the daemon's metrics port (server.metrics-port, "
                                + "/metrics and /health) or another web server; stats, top and admin talk to the "
                                + "daemon's protocol port, server.port (default 7370): --port N",
                        e);
            }
            throw e;
        }
    }

    /** How long a daemon has to answer the handshake: it answers in milliseconds unless the port is not a daemon's. */
    private static final Duration HANDSHAKE_WAIT = Duration.ofSeconds(3);

    /** Whether {@code host:port} answers an HTTP request within a second. */
    static boolean speaksHttp(String host, int port) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(host, port), 1000);
            socket.setSoTimeout(1000);
            socket.getOutputStream()
                    .write(("HEAD / HTTP/1.0\r\nHost: " + host + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            byte[] head = socket.getInputStream().readNBytes(5);
            return new String(head, StandardCharsets.US_ASCII).equals("HTTP/");
        } catch (IOException e) {
            return false;
        }
    }

    /** The daemon's metrics as it sends them (Prometheus text). */
    static String text(RemotePageStore daemon) throws Exception {
        return daemon.daemonMetrics(Deadline.after(Duration.ofSeconds(5))).get(10, TimeUnit.SECONDS);
    }

    /** One reading of the daemon's metrics. */
    static DaemonMetrics read(RemotePageStore daemon) throws Exception {
        return DaemonMetrics.parse(text(daemon), System.nanoTime());
    }
}
