package io.hicache.core.cache;

import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * A cache's metrics in a Prometheus registry: its counters and gauges read from {@link HiCache#stats()} at each scrape
 * (one snapshot per cache per scrape), and histograms of copy durations and store latency observed as they happen.
 * Every cache of a registry shares one collector and one set of histograms, told apart by the {@code namespace}
 * label (caches of one namespace add up), so caches can open and close in one JVM without clashing names. Labels are
 * bounded: namespace, store, tier, direction, store operation, and the cache's fixed sets of causes and reasons.
 * Thread-safe; the cache detaches its export when it closes.
 */
final class CacheMetricsExport implements AutoCloseable {
    /** Copy and store latency buckets, seconds: 50 µs to 10 s. */
    private static final double[] BUCKETS = {
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
    };

    private static final Map<PrometheusRegistry, Shared> SHARED = new WeakHashMap<>();

    private final Shared shared;
    private final String namespace;
    private final String store;
    private final long pageBytes;
    private final int pageSizeTokens;
    private volatile @Nullable Supplier<CacheStats> stats;
    /** Device-to-host and host-to-device copy durations. */
    final DistributionDataPoint backupSeconds;

    final DistributionDataPoint loadSeconds;

    private CacheMetricsExport(Shared shared, String namespace, String store, long pageBytes, int pageSizeTokens) {
        this.shared = shared;
        this.namespace = namespace;
        this.store = store;
        this.pageBytes = pageBytes;
        this.pageSizeTokens = pageSizeTokens;
        this.backupSeconds = shared.copySeconds.labelValues(namespace, "device_to_host");
        this.loadSeconds = shared.copySeconds.labelValues(namespace, "host_to_device");
    }

    /**
     * The export of a cache of {@code namespace} over {@code store} ("none" without one) into {@code registry}; its
     * pages hold {@code pageSizeTokens} tokens in {@code pageBytes} bytes.
     */
    static CacheMetricsExport create(
            PrometheusRegistry registry, String namespace, String store, long pageBytes, int pageSizeTokens) {
        synchronized (SHARED) {
            return new CacheMetricsExport(
                    SHARED.computeIfAbsent(registry, Shared::new), namespace, store, pageBytes, pageSizeTokens);
        }
    }

    /** The data point for one store operation's latency ({@code get}, {@code put}, {@code leading_hits}, ...). */
    DistributionDataPoint storeSeconds(String op) {
        return shared.storeSeconds.labelValues(namespace, store, op);
    }

    /** Starts reporting the cache's counters and gauges, read from {@code source} at each scrape. */
    void start(Supplier<CacheStats> source) {
        stats = source;
        shared.exports.add(this);
    }

    @Override
    public void close() {
        shared.exports.remove(this);
        if (shared.exports.stream().noneMatch(e -> e.namespace.equals(namespace))) {
            shared.copySeconds.removeIf(labels -> labels.getFirst().equals(namespace));
            shared.storeSeconds.removeIf(labels -> labels.getFirst().equals(namespace));
        }
    }

    /** One registry's collector and histograms. */
    private static final class Shared implements MultiCollector {
        final List<CacheMetricsExport> exports = new CopyOnWriteArrayList<>();
        final Histogram copySeconds;
        final Histogram storeSeconds;

        Shared(PrometheusRegistry registry) {
            copySeconds = Histogram.builder()
                    .name("hicache_cache_copy_seconds")
                    .help("time a batch copy between device and host took, from start to done")
                    .labelNames("namespace", "direction")
                    .classicOnly()
                    .classicUpperBounds(BUCKETS)
                    .register(registry);
            storeSeconds = Histogram.builder()
                    .name("hicache_cache_store_operation_seconds")
                    .help("time a page store call took, by operation")
                    .labelNames("namespace", "store", "op")
                    .classicOnly()
                    .classicUpperBounds(BUCKETS)
                    .register(registry);
            registry.register(this);
        }

        @Override
        public MetricSnapshots collect() {
            Families f = new Families();
            for (CacheMetricsExport e : exports) {
                Supplier<CacheStats> source = e.stats;
                if (source != null) {
                    f.add(e, source.get());
                }
            }
            return new MetricSnapshots(f.build());
        }
    }

    /** The metric families of one scrape, summing caches that share labels. */
    private static final class Families {
        private static final Map<String, String> HELP = Map.ofEntries(
                Map.entry("hicache_cache_prompt_tokens", "tokens of the prompts requests asked for"),
                Map.entry("hicache_cache_hit_tokens", "prompt tokens the cache served, by the tier they came from"),
                Map.entry("hicache_cache_computed_tokens", "tokens requests committed beyond what the cache served"),
                Map.entry(
                        "hicache_cache_moved_tokens",
                        "tokens loaded to the device, prefetched from the store, backed up to host, uploaded"),
                Map.entry("hicache_cache_evicted_pages", "pages freed by eviction, by tier and how"),
                Map.entry(
                        "hicache_cache_adopted_pages",
                        "host pages an earlier run left that requests took into the "
                                + "tree (a warm host tier after a restart)"),
                Map.entry("hicache_cache_backups", "device-to-host backups, by outcome"),
                Map.entry("hicache_cache_loads", "host-to-device loads, by outcome"),
                Map.entry("hicache_cache_prefetches", "prefetches from the page store, by outcome"),
                Map.entry("hicache_cache_prefetches_skipped", "prefetches not started, by reason"),
                Map.entry(
                        "hicache_cache_upload_skipped_pages",
                        "pages not uploaded: the store had them or the upload " + "was dropped"),
                Map.entry("hicache_cache_moved_bytes", "bytes copied between tiers, by direction"),
                Map.entry("hicache_cache_failures", "failures, by cause"),
                Map.entry("hicache_cache_queue_depth", "entries waiting in each background loop's queue"),
                Map.entry(
                        "hicache_cache_corrupt_pages",
                        "pages found misnamed or damaged by their tier's read check, never used: host (load-back, "
                                + "upload) and store (the page store's get); each was removed"),
                Map.entry("hicache_cache_pages", "pages the tree holds, by tier"),
                Map.entry("hicache_cache_tree_nodes", "nodes in the radix tree"));

        private final Map<String, Map<Labels, Double>> counters = new LinkedHashMap<>();
        private final Map<String, Map<Labels, Double>> gauges = new LinkedHashMap<>();

        void add(CacheMetricsExport e, CacheStats s) {
            String store = e.store;
            Labels base = Labels.of("namespace", e.namespace);
            counter("hicache_cache_prompt_tokens", base, s.promptTokens());
            counter("hicache_cache_hit_tokens", base.add("tier", "device"), s.deviceHitTokens());
            counter("hicache_cache_hit_tokens", base.add("tier", "host"), s.hostHitTokens());
            counter("hicache_cache_hit_tokens", base.add("tier", "storage"), s.storageHitTokens());
            counter("hicache_cache_computed_tokens", base, s.computedTokens());
            counter(
                    "hicache_cache_evicted_pages",
                    base.add("tier", "device").add("how", "demoted"),
                    s.deviceEvictedPages());
            counter(
                    "hicache_cache_evicted_pages",
                    base.add("tier", "device").add("how", "deleted"),
                    s.deviceDeletedPages());
            counter(
                    "hicache_cache_evicted_pages",
                    base.add("tier", "host").add("how", "deleted"),
                    s.hostEvictedPages());
            counter("hicache_cache_adopted_pages", base, s.hostAdoptedPages());
            counter("hicache_cache_corrupt_pages", base.add("tier", "host"), s.corruptHostPages());
            counter(
                    "hicache_cache_corrupt_pages",
                    base.add("tier", "store").add("store", store),
                    s.corruptStorePages());
            counter("hicache_cache_backups", base.add("outcome", "started"), s.backupsStarted());
            counter("hicache_cache_backups", base.add("outcome", "completed"), s.backupsCompleted());
            counter("hicache_cache_backups", base.add("outcome", "skipped"), s.backupsSkipped());
            counter("hicache_cache_loads", base.add("outcome", "started"), s.loadsStarted());
            counter("hicache_cache_loads", base.add("outcome", "completed"), s.loadsCompleted());
            counter("hicache_cache_prefetches", base.add("outcome", "started"), s.prefetchesStarted());
            counter("hicache_cache_prefetches", base.add("outcome", "completed"), s.prefetchesCompleted());
            counter("hicache_cache_prefetches", base.add("outcome", "revoked"), s.prefetchesRevoked());
            counter("hicache_cache_prefetches", base.add("outcome", "timed_out"), s.prefetchesTimedOut());
            counter("hicache_cache_prefetches", base.add("outcome", "empty"), s.prefetchesEmpty());
            counters.computeIfAbsent("hicache_cache_prefetches_skipped", k -> new LinkedHashMap<>());
            s.prefetchesSkipped()
                    .forEach((reason, n) ->
                            counter("hicache_cache_prefetches_skipped", base.add("reason", reason.label()), n));
            counter("hicache_cache_upload_skipped_pages", base.add("store", store), s.uploadSkippedPages());
            counter("hicache_cache_moved_bytes", base.add("direction", "device_to_host"), s.bytesDeviceToHost());
            counter("hicache_cache_moved_bytes", base.add("direction", "host_to_device"), s.bytesHostToDevice());
            counter(
                    "hicache_cache_moved_bytes",
                    base.add("direction", "host_to_store").add("store", store),
                    s.bytesHostToStore());
            counter(
                    "hicache_cache_moved_bytes",
                    base.add("direction", "store_to_host").add("store", store),
                    s.bytesStoreToHost());
            counters.computeIfAbsent("hicache_cache_failures", k -> new LinkedHashMap<>());
            s.failures().forEach((cause, n) -> counter("hicache_cache_failures", base.add("cause", cause), n));
            s.queueDepths().forEach((loop, n) -> gauge("hicache_cache_queue_depth", base.add("loop", loop), n));
            gauge("hicache_cache_pages", base.add("tier", "device"), s.devicePages());
            gauge("hicache_cache_pages", base.add("tier", "host"), s.hostPages());
            gauge("hicache_cache_tree_nodes", base, s.treeNodes());
            // Tokens moved: the stats count pages, or bytes of whole pages.
            long tokens = e.pageSizeTokens;
            counter(
                    "hicache_cache_moved_tokens",
                    base.add("action", "prefetched").add("store", store),
                    s.prefetchedPages() * tokens);
            counter(
                    "hicache_cache_moved_tokens",
                    base.add("action", "uploaded").add("store", store),
                    s.uploadedPages() * tokens);
            counter(
                    "hicache_cache_moved_tokens",
                    base.add("action", "loaded"),
                    s.bytesHostToDevice() / e.pageBytes * tokens);
            counter(
                    "hicache_cache_moved_tokens",
                    base.add("action", "backed_up"),
                    s.bytesDeviceToHost() / e.pageBytes * tokens);
        }

        private void counter(String name, Labels labels, double value) {
            counters.computeIfAbsent(name, k -> new LinkedHashMap<>()).merge(labels, value, Double::sum);
        }

        private void gauge(String name, Labels labels, double value) {
            gauges.computeIfAbsent(name, k -> new LinkedHashMap<>()).merge(labels, value, Double::sum);
        }

        List<MetricSnapshot> build() {
            List<MetricSnapshot> out = new ArrayList<>();
            counters.forEach((name, points) -> {
                CounterSnapshot.Builder b = CounterSnapshot.builder().name(name).help(HELP.get(name));
                points.forEach((labels, v) -> b.dataPoint(CounterSnapshot.CounterDataPointSnapshot.builder()
                        .labels(labels)
                        .value(v)
                        .build()));
                out.add(b.build());
            });
            gauges.forEach((name, points) -> {
                GaugeSnapshot.Builder b = GaugeSnapshot.builder().name(name).help(HELP.get(name));
                points.forEach((labels, v) -> b.dataPoint(GaugeSnapshot.GaugeDataPointSnapshot.builder()
                        .labels(labels)
                        .value(v)
                        .build()));
                out.add(b.build());
            });
            return out;
        }
    }
}
