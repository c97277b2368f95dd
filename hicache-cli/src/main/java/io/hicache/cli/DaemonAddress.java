package io.hicache.cli;

import io.hicache.core.Deadline;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
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

    /** Connects; the caller closes the client. */
    RemotePageStore connect() {
        return connect(authToken);
    }

    /** Connects with {@code token} in the HELLO instead of {@link #authToken}; the caller closes the client. */
    RemotePageStore connect(String token) {
        return RemotePageStore.open(new RemoteStoreConfig(host, port, token, 1, Duration.ofSeconds(5)));
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
