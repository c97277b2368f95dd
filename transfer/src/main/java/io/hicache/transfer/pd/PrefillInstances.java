package io.hicache.transfer.pd;

import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferEngine;
import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * The prefill instances a decode rank takes KV from, found through their bootstrap servers: each one's rank specs, the
 * segments this engine opened to its ranks, and its health. Every {@code heartbeatMillis} each instance's bootstrap
 * server is asked for {@code /health}; {@code heartbeatMaxFailures} misses in a row declare it dead, and a dead instance
 * is looked up again the next time a room names it.
 *
 * <p>Lookups and segments belong to the decode rank's worker thread; the health checks run on their own thread
 * ({@code pd-decode-heartbeat-<rank>}), each bounded by the lookup timeout, and hand their verdicts to the worker. The
 * rank closes it after its worker.
 */
final class PrefillInstances implements AutoCloseable {
    private final TransferEngine engine;
    private final PdConfig config;
    private final PdThread worker;
    private final PdThread checks;
    private final BootstrapClient bootstrap;
    private final Map<String, Instance> byUrl = new HashMap<>();

    /** One prefill instance. Worker thread only, but {@link #dead} and {@link #deathReason}. */
    final class Instance {
        private final String url;
        private final List<RankSpec> specs;
        private final Map<Integer, RemoteSegment> segments = new HashMap<>();
        private int failures;
        volatile boolean dead;
        volatile @Nullable String deathReason;

        private Instance(String url, List<RankSpec> specs) {
            this.url = url;
            this.specs = specs;
        }

        /** Its ranks' specs, by rank. */
        List<RankSpec> specs() {
            return specs;
        }

        /** This engine's segment to {@code rank}, opened on first use. */
        RemoteSegment segment(int rank) {
            return segments.computeIfAbsent(
                    rank,
                    r -> engine.openSegment(
                            specs.get(r).engineAddress(), Duration.ofMillis(config.lookupTimeoutMillis())));
        }

        /** The segment to {@code rank} if one was opened, else null. */
        @Nullable
        RemoteSegment opened(int rank) {
            return segments.get(rank);
        }
    }

    PrefillInstances(TransferEngine engine, PdConfig config, PdThread worker, String threadName) {
        this.engine = engine;
        this.config = config;
        this.worker = worker;
        this.bootstrap = new BootstrapClient(Duration.ofMillis(config.lookupTimeoutMillis()));
        this.checks = new PdThread(threadName);
        checks.every(config.heartbeatMillis(), this::heartbeat);
    }

    /**
     * The live instance behind {@code url}, looked up if unknown or dead: waits (bounded by the bootstrap timeout) until
     * every one of its ranks registered.
     *
     * @throws IOException when its bootstrap server cannot be reached, or not every rank registered in time
     */
    Instance lookup(String url) throws IOException, InterruptedException {
        Instance p = byUrl.get(url);
        if (p != null && !p.dead) {
            return p;
        }
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.bootstrapTimeoutMillis());
        List<RankSpec> specs = bootstrap.ranks(url);
        while (specs.isEmpty()) {
            if (System.nanoTime() - until > 0) {
                throw new IOException(
                        "not all prefill ranks registered within " + config.bootstrapTimeoutMillis() + " ms");
            }
            Thread.sleep(50);
            specs = bootstrap.ranks(url);
        }
        p = new Instance(url, specs);
        byUrl.put(url, p);
        return p;
    }

    /** On the checks thread: asks each live instance's bootstrap server, and counts the misses on the worker. */
    private void heartbeat() {
        List<Instance> known;
        try {
            known = worker.executor()
                    .submit(() -> List.copyOf(byUrl.values()))
                    .get(config.lookupTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            return;
        }
        for (Instance p : known) {
            if (p.dead) {
                continue;
            }
            boolean ok;
            try {
                ok = bootstrap.healthy(p.url);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            worker.post(() -> {
                p.failures = ok ? 0 : p.failures + 1;
                if (p.failures >= config.heartbeatMaxFailures()) {
                    p.dead = true;
                    p.deathReason = "prefill at " + p.url + " missed " + p.failures + " heartbeats";
                }
            });
        }
    }

    /** Stops the health checks and closes every segment opened to a prefill rank. */
    @Override
    public void close() {
        checks.close();
        for (Instance p : byUrl.values()) {
            p.segments.values().forEach(RemoteSegment::close);
        }
    }
}
