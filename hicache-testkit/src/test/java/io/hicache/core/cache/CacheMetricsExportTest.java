package io.hicache.core.cache;

import static io.hicache.core.cache.TestEngine.concat;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.config.Settings;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.DataPointSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The cache's metrics as a scraper reads them from a Prometheus registry: the default one, or the engine's. */
class CacheMetricsExportTest {
    // the cache fills in its page size (4 tokens here), which the builder's namespace left unstated
    private static final String NS = TestEngine.NS.withPageTokens(4).id();

    @Test
    void theDefaultRegistryCountsWhatTheCacheDid() throws Exception {
        PrometheusRegistry registry = PrometheusRegistry.defaultRegistry;
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        try (TestEngine e = new TestEngine(HiCacheTest.settings(), 64, store)) {
            int[] p = prompt(1000, 40);
            e.serve("a", p);
            e.quiesce();
            e.serve("b", concat(p, prompt(5000, 8)));
            e.quiesce();
            CacheStats s = e.cache.stats();
            assertEquals(88, value(registry, "hicache_cache_prompt_tokens", "tier", null));
            assertEquals(40, value(registry, "hicache_cache_hit_tokens", "tier", "device"));
            assertEquals(0, value(registry, "hicache_cache_hit_tokens", "tier", "host"));
            assertEquals(48, value(registry, "hicache_cache_computed_tokens", "tier", null));
            assertEquals(s.backupsCompleted(), value(registry, "hicache_cache_backups", "outcome", "completed"));
            assertEquals(s.hostPages(), value(registry, "hicache_cache_pages", "tier", "host"));
            assertEquals(s.uploadedPages() * 4, value(registry, "hicache_cache_moved_tokens", "action", "uploaded"));
            assertTrue(s.uploadedPages() > 0, "write-through uploads to the store: " + s);
            // Histograms count what happened, one observation per copy and per store call.
            assertEquals(
                    s.backupsCompleted(), value(registry, "hicache_cache_copy_seconds", "direction", "device_to_host"));
            assertTrue(value(registry, "hicache_cache_store_operation_seconds", "op", "put") >= 1);
        }
        assertEquals(0, series(registry, "hicache_cache_prompt_tokens"), "a closed cache leaves the registry");
        assertEquals(0, series(registry, "hicache_cache_copy_seconds"), "and its histograms");
    }

    @Test
    void anEnginesRegistryGetsItsCachesAndCachesOfOneNamespaceAddUp(@org.junit.jupiter.api.io.TempDir Path dir)
            throws Exception {
        PrometheusRegistry registry = new PrometheusRegistry();
        HiCacheConfig config = HiCacheConfig.from(Settings.builder()
                .flag("page-size", "4")
                .flag("host.dir", Files.createTempDirectory(dir, "host").toString())
                .build());
        HiCacheConfig other = HiCacheConfig.from(Settings.builder()
                .flag("page-size", "4")
                .flag("host.dir", Files.createTempDirectory(dir, "host").toString())
                .build());
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(64L << 20, 2);
                HiCache one = open(config, runtime, registry);
                HiCache two = open(other, runtime, registry)) {
            one.request("x", prompt(0, 16)).close();
            two.request("y", prompt(0, 8)).close();
            assertEquals(24, value(registry, "hicache_cache_prompt_tokens", "tier", null), "two caches, one series");
            assertEquals(0, value(registry, "hicache_cache_pages", "tier", "device"), "nothing committed");
            assertEquals(
                    0,
                    series(PrometheusRegistry.defaultRegistry, "hicache_cache_prompt_tokens"),
                    "nothing in the default registry");
        }
        assertEquals(0, series(registry, "hicache_cache_prompt_tokens"));
    }

    private static HiCache open(HiCacheConfig config, EmulatedDeviceRuntime runtime, PrometheusRegistry registry) {
        return HiCache.builder()
                .config(config)
                .namespace(TestEngine.NS)
                .geometry(TestEngine.GEOMETRY)
                .devicePages(32)
                .runtime(runtime)
                .metrics(registry)
                .open();
    }

    /** The value (a histogram's count) of the series of this cache's namespace with {@code label=labelValue}. */
    private static double value(PrometheusRegistry registry, String name, String label, String labelValue) {
        double sum = 0;
        int found = 0;
        for (DataPointSnapshot p : points(registry, name)) {
            Labels l = p.getLabels();
            if (NS.equals(l.get("namespace")) && (labelValue == null || labelValue.equals(l.get(label)))) {
                found++;
                sum += switch (p) {
                    case CounterSnapshot.CounterDataPointSnapshot c -> c.getValue();
                    case GaugeSnapshot.GaugeDataPointSnapshot g -> g.getValue();
                    case HistogramSnapshot.HistogramDataPointSnapshot h -> h.getCount();
                    default -> throw new AssertionError("unexpected " + p);
                };
            }
        }
        assertTrue(found > 0, "no series " + name + "{" + label + "=" + labelValue + "}");
        return sum;
    }

    private static int series(PrometheusRegistry registry, String name) {
        return (int) points(registry, name).stream()
                .filter(p -> NS.equals(p.getLabels().get("namespace")))
                .count();
    }

    private static List<? extends DataPointSnapshot> points(PrometheusRegistry registry, String name) {
        for (MetricSnapshot m : registry.scrape()) {
            if (m.getMetadata().getName().equals(name)) {
                return m.getDataPoints();
            }
        }
        return List.of();
    }
}
