package io.hicache.transfer.pd;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The bootstrap service of a prefill instance, as SGLang's: prefill ranks register ({@code PUT /route} with their
 * {@link RankSpec}); decode looks them up ({@code GET /route} answers with every rank's spec, one per line, or 503
 * until all {@code tpSize} ranks have registered); {@code GET /health} answers 200 for heartbeats.
 *
 * <p>Thread-safe. Its starter closes it.
 */
public final class BootstrapServer implements AutoCloseable {
    private final HttpServer server;
    private final ExecutorService threads;
    private final int tpSize;
    private final Map<Integer, String> ranks = new TreeMap<>();

    private BootstrapServer(HttpServer server, int tpSize) {
        this.server = server;
        this.tpSize = tpSize;
        this.threads = Executors.newFixedThreadPool(
                2, Threads.factory("pd-bootstrap-" + server.getAddress().getPort()));
        server.setExecutor(threads);
        server.createContext("/route", this::route);
        server.createContext("/health", ex -> answer(ex, 200, "ok"));
        server.start();
    }

    /** Starts on {@code host:port} (0 picks a port) for a prefill instance of {@code tpSize} ranks. */
    public static BootstrapServer start(String host, int port, int tpSize) throws IOException {
        if (tpSize < 1) {
            throw new IllegalArgumentException("tpSize must be >= 1, got " + tpSize);
        }
        return new BootstrapServer(HttpServer.create(new InetSocketAddress(host, port), 64), tpSize);
    }

    /** {@code http://host:port}. */
    public String url() {
        return "http://" + server.getAddress().getHostString() + ":"
                + server.getAddress().getPort();
    }

    private void route(HttpExchange ex) throws IOException {
        try (ex) {
            if ("PUT".equals(ex.getRequestMethod())) {
                String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
                RankSpec spec;
                try {
                    spec = RankSpec.decode(body);
                } catch (IllegalArgumentException e) {
                    // decode's failures say what is wrong
                    answer(ex, 400, Checks.checkNotNull(e.getMessage(), "a rank spec's parse failure"));
                    return;
                }
                if (spec.tpSize() != tpSize) {
                    answer(ex, 400, "this prefill instance has tp size " + tpSize + ", the rank says " + spec.tpSize());
                    return;
                }
                synchronized (ranks) {
                    ranks.put(spec.tpRank(), body);
                }
                answer(ex, 200, "registered");
            } else if ("GET".equals(ex.getRequestMethod())) {
                String all;
                synchronized (ranks) {
                    if (ranks.size() < tpSize) {
                        answer(ex, 503, ranks.size() + " of " + tpSize + " prefill ranks registered");
                        return;
                    }
                    all = String.join("\n", ranks.values());
                }
                answer(ex, 200, all);
            } else {
                answer(ex, 405, "PUT or GET");
            }
        }
    }

    private static void answer(HttpExchange ex, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }

    @Override
    public void close() {
        server.stop(0);
        threads.shutdownNow();
    }
}
