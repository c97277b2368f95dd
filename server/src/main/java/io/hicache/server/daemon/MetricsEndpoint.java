package io.hicache.server.daemon;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.hicache.core.util.Threads;
import io.prometheus.metrics.exporter.httpserver.MetricsHandler;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * {@code /metrics} (the Prometheus client's handler: text, OpenMetrics or protobuf as the scraper asks) and
 * {@code /health} over HTTP, on the JDK's HTTP server with one daemon thread ({@code hicache-server-metrics}).
 * {@code /health} answers {@code 200 ok}; {@code 200 degraded: ...} when acknowledged pages could not be written to L3;
 * {@code 503 failing: ...} while puts fail for a reason the daemon knows ({@link Health}); {@code 503 shutting down}
 * during a graceful shutdown. Thread-safe; the server stops it.
 */
final class MetricsEndpoint implements AutoCloseable {
    private final HttpServer http;

    MetricsEndpoint(
            String bind,
            int port,
            PrometheusRegistry metrics,
            BooleanSupplier serving,
            Supplier<@Nullable String> failing,
            Supplier<@Nullable String> degraded)
            throws IOException {
        http = HttpServer.create(new InetSocketAddress(bind, port), 16);
        http.setExecutor(Executors.newSingleThreadExecutor(r -> Threads.unstarted("server-metrics", r)));
        http.createContext("/metrics", new MetricsHandler(metrics));
        http.createContext("/health", ex -> {
            if (!serving.getAsBoolean()) {
                reply(ex, 503, "text/plain", "shutting down\n");
                return;
            }
            String failure = failing.get();
            String trouble = degraded.get();
            if (failure != null) {
                reply(ex, 503, "text/plain", failure + (trouble == null ? "" : "\n" + trouble) + "\n");
                return;
            }
            reply(ex, 200, "text/plain", trouble == null ? "ok\n" : trouble + "\n");
        });
        http.start();
    }

    int port() {
        return http.getAddress().getPort();
    }

    private static void reply(HttpExchange ex, int status, String type, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", type);
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }

    @Override
    public void close() {
        http.stop(0);
    }
}
