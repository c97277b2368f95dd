package io.hicache.transfer.pd;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Talks to a {@link BootstrapServer}; every request has a timeout. Thread-safe.
 */
final class BootstrapClient {
    private final HttpClient http;
    private final Duration timeout;

    BootstrapClient(Duration timeout) {
        this.timeout = timeout;
        this.http = HttpClient.newBuilder()
                .connectTimeout(timeout)
                .version(HttpClient.Version.HTTP_1_1)
                .build();
    }

    /** Registers a prefill rank, retrying 5 times with backoff (0.2 s doubling) as SGLang does. */
    void register(String url, RankSpec spec) throws IOException, InterruptedException {
        IOException last = null;
        long backoff = 200;
        for (int attempt = 0; attempt < 5; attempt++) {
            try {
                HttpResponse<String> r = http.send(
                        HttpRequest.newBuilder(URI.create(url + "/route"))
                                .timeout(timeout)
                                .PUT(HttpRequest.BodyPublishers.ofString(spec.encode()))
                                .build(),
                        HttpResponse.BodyHandlers.ofString());
                if (r.statusCode() == 200) {
                    return;
                }
                last = new IOException("bootstrap " + url + " refused the registration: " + r.body());
                if (r.statusCode() == 400) {
                    throw last;
                }
            } catch (IOException e) {
                last = e;
            }
            Thread.sleep(backoff);
            backoff = Math.min(5_000, backoff * 2);
        }
        throw last;
    }

    /** Every prefill rank's spec, by rank; empty while not all have registered. */
    List<RankSpec> ranks(String url) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(
                HttpRequest.newBuilder(URI.create(url + "/route"))
                        .timeout(timeout)
                        .GET()
                        .build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() == 503) {
            return List.of();
        }
        if (r.statusCode() != 200) {
            throw new IOException("bootstrap " + url + " answered " + r.statusCode() + ": " + r.body());
        }
        List<RankSpec> specs = new ArrayList<>();
        for (String line : r.body().split("\n")) {
            specs.add(RankSpec.decode(line));
        }
        return specs;
    }

    /**
     * Waits until the bootstrap server at {@code url} answers with every rank registered, or {@code wait} passed: true
     * if it did. Unreachable servers and refusals count as not yet.
     */
    boolean awaitRanks(String url, Duration wait) throws InterruptedException {
        long end = System.nanoTime() + wait.toNanos();
        while (System.nanoTime() < end) {
            try {
                if (!ranks(url).isEmpty()) {
                    return true;
                }
            } catch (IOException | RuntimeException e) {
                // not up yet, or not every rank registered (503)
            }
            Thread.sleep(50);
        }
        return false;
    }

    /** Whether the bootstrap server answers its health check within the timeout. */
    boolean healthy(String url) throws InterruptedException {
        try {
            return http.send(
                                    HttpRequest.newBuilder(URI.create(url + "/health"))
                                            .timeout(timeout)
                                            .GET()
                                            .build(),
                                    HttpResponse.BodyHandlers.discarding())
                            .statusCode()
                    == 200;
        } catch (IOException e) {
            return false;
        }
    }
}
