package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.Wire;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.Unit;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The daemon's metrics, in a Prometheus registry of its own (several daemons may share a JVM, in tests and
 * embedders): requests and their latency by operation, bytes in and out, errors by code, connections, and the slab's
 * and the write-behind's figures read from them when scraped. {@link MetricsEndpoint} serves the registry over HTTP
 * and the protocol's STATS answers {@link #render}. Thread-safe.
 */
final class ServerMetrics {
    /** Latency buckets, seconds: 100 µs to 10 s. */
    private static final double[] BUCKETS = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
    };

    final PrometheusRegistry registry = new PrometheusRegistry();
    final AtomicInteger connections = new AtomicInteger();
    final Counter connectionsRefused =
            counter("hicache_server_connections_refused", "connections refused at the limit");
    final Counter partialFramesRefused = counter(
            "hicache_server_partial_frames_refused",
            "frames refused over server.max-partial-frame-bytes (their connections closed)");
    final Counter pausedReads =
            counter("hicache_server_paused_reads", "times a connection's reading paused at its in-flight limit");
    final Counter bytesIn = Counter.builder()
            .name("hicache_server_received_bytes")
            .unit(Unit.BYTES)
            .help("frame bytes received")
            .register(registry);
    final Counter bytesOut = Counter.builder()
            .name("hicache_server_sent_bytes")
            .unit(Unit.BYTES)
            .help("frame bytes sent")
            .register(registry);
    private final Counter errors = Counter.builder()
            .name("hicache_server_errors")
            .help("requests answered with an error, by code")
            .labelNames("code")
            .register(registry);
    private final Histogram latency = Histogram.builder()
            .name("hicache_server_request_seconds")
            .help("request latency by operation")
            .labelNames("op")
            .classicOnly()
            .classicUpperBounds(BUCKETS)
            .register(registry);
    /** The latency data point of each operation code, looked up once. */
    private final AtomicReferenceArray<DistributionDataPoint> latencyByOp = new AtomicReferenceArray<>(256);

    ServerMetrics() {
        GaugeWithCallback.builder()
                .name("hicache_server_connections")
                .help("open client connections")
                .callback(cb -> cb.call(connections.get()))
                .register(registry);
        // Every error code at 0 from the start, so that a rate over them is 0 rather than no data.
        for (int code = 1; code <= Wire.E_REFUSED; code++) {
            errors.initLabelValues(Wire.errorName(code));
        }
        errors.initLabelValues("connection");
    }

    private Counter counter(String name, String help) {
        return Counter.builder().name(name).help(help).register(registry);
    }

    void request(int op, long nanos) {
        DistributionDataPoint point = latencyByOp.get(op & 0xFF);
        if (point == null) {
            point = latency.labelValues(Wire.opName(op).toLowerCase(Locale.ROOT));
            latencyByOp.set(op & 0xFF, point);
        }
        point.observe(nanos / 1e9);
    }

    /** Redis commands RESP connections ran, by command (the ones docs/resp.md lists; others as "other"). */
    private final Counter respCommands = Counter.builder()
            .name("hicache_server_resp_commands")
            .help("commands run on RESP connections (server.resp-port), by command")
            .labelNames("command")
            .register(registry);

    private static final java.util.Set<String> RESP_COMMANDS = java.util.Set.of(
            "PING",
            "ECHO",
            "QUIT",
            "AUTH",
            "HELLO",
            "SELECT",
            "GET",
            "SET",
            "MGET",
            "MSET",
            "EXISTS",
            "DEL",
            "UNLINK",
            "STRLEN",
            "TYPE",
            "TTL",
            "PTTL",
            "EXPIRE",
            "PEXPIRE",
            "DBSIZE",
            "SCAN",
            "INFO",
            "CLIENT",
            "COMMAND",
            "FLUSHDB",
            "FLUSHALL");

    /** A RESP command done in {@code nanos}: counted, and timed with the binary protocol's ops as {@code resp_<name>}. */
    void resp(String command, long nanos) {
        String name = RESP_COMMANDS.contains(command) ? command : "OTHER";
        respCommands.labelValues(name.toLowerCase(Locale.ROOT)).inc();
        latency.labelValues("resp_" + name.toLowerCase(Locale.ROOT)).observe(nanos / 1e9);
    }

    /** Open connections, both protocols. */
    int connections() {
        return connections.get();
    }

    void error(String code) {
        errors.labelValues(code).inc();
    }

    /** Adds the slab's and the write-behind's figures, read from {@code cache} at each scrape. Once per daemon. */
    void export(SlabCache cache) {
        TierCounters counters = cache.counters;
        counted("hicache_server_hits_host", "pages served from the host slab", counters.hostHits);
        counted("hicache_server_hits_store", "pages served from the L3 store (and promoted)", counters.storeHits);
        counted("hicache_server_misses", "pages found in no tier", counters.misses);
        CounterWithCallback.builder()
                .name("hicache_server_corrupt_pages")
                .help(
                        "pages found damaged (bytes failing their checksum or identity header) and removed, by tier: the "
                                + "slab's by the daemon's own checks (write-behind, CRC-32 conversion, warm restart), the "
                                + "store's by the L3 store's reads; each was answered as CORRUPT or read as a miss, never served")
                .labelNames("tier")
                .callback(cb -> {
                    cb.call(counters.corruptPages.sum(), "slab");
                    cb.call(
                            cache.l3
                                    .current()
                                    .map(s -> s.stats().corruptPages())
                                    .orElse(0L),
                            "store");
                })
                .register(registry);
        counted("hicache_server_evicted_pages", "pages evicted from the host slab", counters.evictedPages);
        counted("hicache_server_rejected_puts", "puts refused (full, over quota, too large)", counters.rejectedPuts);
        CounterWithCallback.builder()
                .name("hicache_server_same_host_bytes")
                .unit(Unit.BYTES)
                .help("page bytes same-host clients read from the slab (leases) or wrote into it (reservations): "
                        + "bytes that do not cross the socket")
                .labelNames("direction")
                .callback(cb -> {
                    cb.call(counters.sameHostReadBytes.sum(), "read");
                    cb.call(counters.sameHostWrittenBytes.sum(), "write");
                })
                .register(registry);
        counted(
                "hicache_server_landed_pages",
                "PUT pages received straight into their room in the host slab and stored (server.put-into-slab)",
                counters.landedPages);
        counted(
                "hicache_server_landed_in_place_bytes",
                "bytes of landed pages the socket read straight into their room (the rest of them came in with a "
                        + "PUT's table and were copied)",
                counters.landedInPlaceBytes);
        counted(
                "hicache_server_unchecked_pages",
                "PUT pages stored with the client's CRC-32C without their bytes checked (a PUT flagged UNCHECKED)",
                counters.uncheckedPages);
        counted("hicache_server_write_behind_pages", "pages written behind to L3", cache.writeBehind.written);
        counted(
                "hicache_server_write_behind_loop_failures",
                "rounds of the write-behind loop that failed unexpectedly (a bug, a store breaking its contract) and "
                        + "were survived; /health says failing for a minute after each",
                cache.writeBehind.loopFailures);
        counted(
                "hicache_server_write_behind_failures",
                "failed tries to write a page behind to L3",
                cache.writeBehind.failures);
        counted(
                "hicache_server_write_behind_abandoned_pages",
                "acknowledged pages the write-behind gave up on after server.write-behind-max-tries (not in L3)",
                cache.writeBehind.abandoned);
        counted(
                "hicache_server_write_behind_dropped_pages",
                "acknowledged pages not written behind because the L3 store was detached first (not in L3)",
                cache.writeBehind.dropped);
        gauge(
                "hicache_server_healthy",
                "1 while puts succeed; 0 while they fail for a reason the daemon knows (no room in the slab, the L3 "
                        + "store failing the write-behind): /health then answers 503 with the reason",
                () -> cache.health.failing() == null ? 1 : 0);
        gauge("hicache_server_slab_bytes", "bytes of the host slab", cache.space::slabBytes);
        gauge("hicache_server_slab_free_bytes", "bytes of the host slab free for pages", cache.space::freeBytes);
        gauge("hicache_server_pages", "pages in the host slab", cache::pageCount);
        gauge(
                "hicache_server_write_behind_pending_pages",
                "pages in the slab not yet written to L3",
                cache.writeBehind::pendingPages);
        if (cache.events.enabled()) {
            counter(
                    "hicache_server_kv_events_published",
                    "KV events handed to the publisher",
                    () -> cache.events.sink().stats().publishedEvents());
            counter(
                    "hicache_server_kv_events_dropped",
                    "KV events dropped, oldest first, because the publisher fell "
                            + "behind (server.kv-events-config max_queue_size)",
                    () -> cache.events.sink().stats().droppedEvents());
            counter(
                    "hicache_server_kv_event_batches_failed",
                    "KV event batches the publisher failed on",
                    () -> cache.events.sink().stats().failedBatches());
            gauge(
                    "hicache_server_kv_events_queued",
                    "KV events waiting for the publisher",
                    () -> cache.events.sink().stats().queuedEvents());
        }
    }

    private void counted(String name, String help, LongAdder value) {
        counter(name, help, value::sum);
    }

    private void counter(String name, String help, LongSupplier value) {
        CounterWithCallback.builder()
                .name(name)
                .help(help)
                .callback(cb -> cb.call(value.getAsLong()))
                .register(registry);
    }

    private void gauge(String name, String help, LongSupplier value) {
        GaugeWithCallback.builder()
                .name(name)
                .help(help)
                .callback(cb -> cb.call(value.getAsLong()))
                .register(registry);
    }

    /**
     * What connections hold now: leases, reservations, and bytes of frames still arriving. All three go back to 0 when
     * the clients holding them go, however they go (a client killed mid-lease, mid-reserve or mid-put included).
     */
    void exportHeld(Leases leases, FrameDecoder.Budget partialFrames) {
        gauge(
                "hicache_server_leases",
                "leases held by connections now (pages pinned for same-host reads)",
                leases::active);
        gauge(
                "hicache_server_reservations",
                "reservations held by connections now (slab rooms for same-host writes)",
                leases::reserved);
        gauge(
                "hicache_server_partial_frame_bytes",
                "bytes of frames still arriving, held against server.max-partial-frame-bytes",
                partialFrames::heldBytes);
    }

    /**
     * A cluster member's gauge: {@code hicache_server_cluster_registered{cluster, member}}, 1 while its record is in
     * etcd as far as it knows, 0 while etcd does not answer or its lease was lost.
     */
    void exportCluster(String cluster, String member, java.util.function.BooleanSupplier registered) {
        GaugeWithCallback.builder()
                .name("hicache_server_cluster_registered")
                .help("1 while this member's record is in etcd (its lease renewed), 0 while etcd does not answer or "
                        + "the lease was lost (the daemon serves either way)")
                .labelNames("cluster", "member")
                .callback(cb -> cb.call(registered.getAsBoolean() ? 1 : 0, cluster, member))
                .register(registry);
    }

    private final Counter tenantConnections = Counter.builder()
            .name("hicache_server_tenant_connections")
            .help("connections accepted, by the tenant they authenticated as (\"\" for none)")
            .labelNames("tenant")
            .register(registry);

    /** A connection authenticated as {@code tenant} ("" for none). */
    void tenantConnection(String tenant) {
        tenantConnections.labelValues(tenant).inc();
    }

    /** {@code hicache_server_tenant_bytes{tenant}}: host-slab bytes each configured tenant's namespaces hold. */
    void exportTenants(Tenants tenants, SlabSpace space) {
        if (!tenants.any()) {
            return;
        }
        GaugeWithCallback.builder()
                .name("hicache_server_tenant_bytes")
                .unit(Unit.BYTES)
                .help("host-slab bytes held by each tenant's namespaces (server.tenant-quota bounds them)")
                .labelNames("tenant")
                .callback(cb -> {
                    for (String t : tenants.names()) {
                        cb.call(space.tenantBytes(t), t);
                    }
                })
                .register(registry);
    }

    /** Everything, in Prometheus' text format (what /metrics serves to a scraper that asks for text). */
    String render() {
        ByteArrayOutputStream out = new ByteArrayOutputStream(8192);
        try {
            PrometheusTextFormatWriter.create().write(out, registry.scrape());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toString(StandardCharsets.UTF_8);
    }
}
