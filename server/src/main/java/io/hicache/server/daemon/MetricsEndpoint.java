package io.hicache.server.daemon;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
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
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import org.jspecify.annotations.Nullable;

/**
 * {@code /metrics} (the Prometheus client's handler: text, OpenMetrics or protobuf as the scraper asks),
 * {@code /health} and {@code POST /v1/prefix-hits} ({@link PrefixQueryEndpoint}) over HTTP, or HTTPS with the daemon's
 * TLS certificate, on the JDK's HTTP server with four daemon threads ({@code hicache-server-http}).
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
            Supplier<@Nullable String> degraded,
            @Nullable SSLContext tls,
            PrefixQueryEndpoint prefixQueries)
            throws IOException {
        if (tls != null) {
            HttpsServer https = HttpsServer.create(new InetSocketAddress(bind, port), 16);
            https.setHttpsConfigurator(new HttpsConfigurator(tls) {
                @Override
                public void configure(HttpsParameters params) {
                    SSLParameters p = tls.getDefaultSSLParameters();
                    p.setProtocols(new String[] {"TLSv1.3", "TLSv1.2"}); // as the protocol ports
                    params.setSSLParameters(p);
                }
            });
            http = https;
        } else {
            http = HttpServer.create(new InetSocketAddress(bind, port), 16);
        }
        // Four threads: prefix queries waiting for L3 (each at most 60 s) do not hold up a scrape or a health check.
        http.setExecutor(Executors.newFixedThreadPool(4, r -> Threads.unstarted("server-http", r)));
        http.createContext("/v1/prefix-hits", prefixQueries);
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
