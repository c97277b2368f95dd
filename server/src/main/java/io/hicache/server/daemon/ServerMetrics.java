package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.Wire;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * The daemon's counters, written out in Prometheus' text format by {@link MetricsEndpoint}: requests and their
 * latency (a fixed-bucket histogram) by operation, bytes in and out, errors by code, connections, and the slab's and
 * the write-behind's gauges. Thread-safe and lock-free.
 */
final class ServerMetrics {
    /** Latency buckets, seconds. */
    private static final double[] BUCKETS = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
            0.25, 0.5, 1, 2.5, 5, 10};

    final AtomicInteger connections = new AtomicInteger();
    final LongAdder connectionsRefused = new LongAdder();
    final LongAdder partialFramesRefused = new LongAdder();
    final LongAdder pausedReads = new LongAdder();
    final LongAdder bytesIn = new LongAdder();
    final LongAdder bytesOut = new LongAdder();
    private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
    private final Map<String, Histogram> latency = new ConcurrentHashMap<>();

    private static final class Histogram {
        final LongAdder[] counts = new LongAdder[BUCKETS.length + 1];
        final LongAdder count = new LongAdder();
        final LongAdder sumNanos = new LongAdder();

        Histogram() {
            for (int i = 0; i < counts.length; i++) {
                counts[i] = new LongAdder();
            }
        }
    }

    void request(int op, long nanos) {
        Histogram h = latency.computeIfAbsent(Wire.opName(op).toLowerCase(java.util.Locale.ROOT), k -> new Histogram());
        double seconds = nanos / 1e9;
        int b = 0;
        while (b < BUCKETS.length && seconds > BUCKETS[b]) {
            b++;
        }
        h.counts[b].increment();
        h.count.increment();
        h.sumNanos.add(nanos);
    }

    void error(String code) {
        errors.computeIfAbsent(code, k -> new LongAdder()).increment();
    }

    /** The Prometheus text exposition of everything, with the slab cache's figures. */
    String render(SlabCache cache) {
        StringBuilder b = new StringBuilder();
        gauge(b, "hicache_server_connections", "open client connections", connections.get());
        counter(b, "hicache_server_connections_refused_total", "connections refused at the limit", connectionsRefused.sum());
        counter(b, "hicache_server_partial_frames_refused_total",
                "frames refused over server.max-partial-frame-bytes (their connections closed)", partialFramesRefused.sum());
        counter(b, "hicache_server_paused_reads_total", "times a connection's reading paused at its in-flight limit",
                pausedReads.sum());
        counter(b, "hicache_server_bytes_received_total", "frame bytes received", bytesIn.sum());
        counter(b, "hicache_server_bytes_sent_total", "frame bytes sent", bytesOut.sum());
        b.append("# HELP hicache_server_errors_total requests answered with an error, by code\n");
        b.append("# TYPE hicache_server_errors_total counter\n");
        new TreeMap<>(errors).forEach((code, n) -> b.append("hicache_server_errors_total{code=\"").append(code)
                .append("\"} ").append(n.sum()).append('\n'));
        b.append("# HELP hicache_server_request_seconds request latency by operation\n");
        b.append("# TYPE hicache_server_request_seconds histogram\n");
        new TreeMap<>(latency).forEach((op, h) -> {
            long cumulative = 0;
            for (int i = 0; i < BUCKETS.length; i++) {
                cumulative += h.counts[i].sum();
                b.append("hicache_server_request_seconds_bucket{op=\"").append(op).append("\",le=\"").append(BUCKETS[i])
                        .append("\"} ").append(cumulative).append('\n');
            }
            b.append("hicache_server_request_seconds_bucket{op=\"").append(op).append("\",le=\"+Inf\"} ")
                    .append(h.count.sum()).append('\n');
            b.append("hicache_server_request_seconds_sum{op=\"").append(op).append("\"} ").append(h.sumNanos.sum() / 1e9)
                    .append('\n');
            b.append("hicache_server_request_seconds_count{op=\"").append(op).append("\"} ").append(h.count.sum())
                    .append('\n');
        });
        counter(b, "hicache_server_hits_host_total", "pages served from the host slab", cache.hostHits.sum());
        counter(b, "hicache_server_hits_store_total", "pages served from the L3 store (and promoted)", cache.storeHits.sum());
        counter(b, "hicache_server_misses_total", "pages found in no tier", cache.misses.sum());
        counter(b, "hicache_server_evicted_pages_total", "pages evicted from the host slab", cache.evictedPages.sum());
        counter(b, "hicache_server_rejected_puts_total", "puts refused (full, over quota, too large)", cache.rejectedPuts.sum());
        counter(b, "hicache_server_write_behind_pages_total", "pages written behind to L3", cache.writeBehind.written.sum());
        counter(b, "hicache_server_write_behind_failures_total", "failed tries to write a page behind to L3",
                cache.writeBehind.failures.sum());
        counter(b, "hicache_server_write_behind_abandoned_pages_total",
                "acknowledged pages the write-behind gave up on after server.write-behind-max-tries (not in L3)",
                cache.writeBehind.abandoned.sum());
        if (cache.events.enabled()) {
            var kv = cache.events.sink().stats();
            counter(b, "hicache_server_kv_events_published_total", "KV events handed to the publisher", kv.publishedEvents());
            counter(b, "hicache_server_kv_events_dropped_total",
                    "KV events dropped, oldest first, because the publisher fell behind (server.kv-events-config max_queue_size)",
                    kv.droppedEvents());
            counter(b, "hicache_server_kv_event_batches_failed_total", "KV event batches the publisher failed on",
                    kv.failedBatches());
            gauge(b, "hicache_server_kv_events_queued", "KV events waiting for the publisher", kv.queuedEvents());
        }
        new TreeMap<>(cache.gauges()).forEach((name, value) -> gauge(b, "hicache_server_" + name, name.replace('_', ' '),
                value));
        return b.toString();
    }

    private static void counter(StringBuilder b, String name, String help, long value) {
        b.append("# HELP ").append(name).append(' ').append(help).append('\n');
        b.append("# TYPE ").append(name).append(" counter\n");
        b.append(name).append(' ').append(value).append('\n');
    }

    private static void gauge(StringBuilder b, String name, String help, long value) {
        b.append("# HELP ").append(name).append(' ').append(help).append('\n');
        b.append("# TYPE ").append(name).append(" gauge\n");
        b.append(name).append(' ').append(value).append('\n');
    }
}
