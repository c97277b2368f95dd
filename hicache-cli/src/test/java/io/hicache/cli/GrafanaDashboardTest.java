package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.hicache.core.Deadline;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.FaultyPageStore;
import io.hicache.testkit.SlowPageStore;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/grafana/hicache.json against what the code exports: every metric a panel's query names is in a real daemon's
 * /metrics or a real cache's registry (scraped as text, as Prometheus would), and every label a query groups or
 * matches by is on one of the metrics it names. A renamed metric or label fails here, not on someone's dashboard.
 */
class GrafanaDashboardTest {
    private static final Path DASHBOARD = Path.of("..", "docs", "grafana", "hicache.json");
    private static final Pattern METRIC = Pattern.compile("\\bhicache_[a-z0-9_]+");
    private static final Pattern GROUPING = Pattern.compile("\\b(?:by|without)\\s*\\(([^)]*)\\)");
    private static final Pattern MATCHER = Pattern.compile("([a-z_]+)\\s*(?:=~|!~|!=|=)\\s*\"");
    /** Labels Prometheus adds at scrape time or histograms carry, not the code. */
    private static final Set<String> SCRAPE_LABELS = Set.of("instance", "job", "le", "__name__");

    @Test
    void everyQueryNamesMetricsAndLabelsTheCodeExports(@TempDir Path dir) throws Exception {
        Map<String, Set<String>> exported = new HashMap<>();
        collect(daemonMetrics(dir), exported);
        collect(cacheMetrics(dir), exported);
        assertTrue(exported.keySet().stream().anyMatch(n -> n.startsWith("hicache_server_")), exported::toString);
        assertTrue(exported.keySet().stream().anyMatch(n -> n.startsWith("hicache_cache_")), exported::toString);

        JsonNode dashboard = new ObjectMapper().readTree(DASHBOARD.toFile());
        List<String> exprs = new ArrayList<>();
        for (JsonNode panel : dashboard.path("panels")) {
            for (JsonNode target : panel.path("targets")) {
                exprs.add(target.path("expr").asText());
            }
        }
        assertTrue(exprs.size() >= 20, "the dashboard has its queries: " + exprs.size());
        assertEquals(List.of(), problems(exprs, exported));
    }

    @Test
    void theCheckCatchesARenamedMetricAndAMisspeltLabel() {
        Map<String, Set<String>> exported = Map.of("hicache_server_errors_total", Set.of("code"));
        assertEquals(
                List.of(),
                problems(
                        List.of("sum by (code) (rate(hicache_server_errors_total{instance=~\"$instance\"}[1m]))"),
                        exported));
        List<String> found = problems(
                List.of(
                        "sum(rate(hicache_server_error_total[1m]))",
                        "sum by (cod) (rate(hicache_server_errors_total[1m]))",
                        "sum(rate(other_total[1m]))"),
                exported);
        assertEquals(3, found.size(), found::toString);
        assertTrue(found.get(0).startsWith("unknown metric hicache_server_error_total"), found::toString);
        assertTrue(found.get(1).startsWith("label cod is on none"), found::toString);
        assertTrue(found.get(2).startsWith("a query names no HiCache metric"), found::toString);
    }

    /** What is wrong with each query against {@code exported} (metric name to its label names): nothing, ideally. */
    private static List<String> problems(List<String> exprs, Map<String, Set<String>> exported) {
        List<String> problems = new ArrayList<>();
        for (String expr : exprs) {
            Set<String> labels = new HashSet<>();
            Matcher m = METRIC.matcher(expr);
            boolean any = false;
            while (m.find()) {
                any = true;
                Set<String> have = exported.get(m.group());
                if (have == null) {
                    problems.add("unknown metric " + m.group() + " in: " + expr);
                } else {
                    labels.addAll(have);
                }
            }
            if (!any) {
                problems.add("a query names no HiCache metric: " + expr);
            }
            for (String label : labelsUsed(expr)) {
                if (!SCRAPE_LABELS.contains(label) && !labels.contains(label)) {
                    problems.add("label " + label + " is on none of the metrics of: " + expr);
                }
            }
        }
        return problems;
    }

    /** Labels a query groups by or matches on. */
    private static Set<String> labelsUsed(String expr) {
        Set<String> out = new HashSet<>();
        Matcher g = GROUPING.matcher(expr);
        while (g.find()) {
            for (String l : g.group(1).split(",")) {
                if (!l.isBlank()) {
                    out.add(l.trim());
                }
            }
        }
        Matcher m = MATCHER.matcher(expr);
        while (m.find()) {
            out.add(m.group(1));
        }
        return out;
    }

    /** Sample names and their label names, from Prometheus text ({@code name{a="x",b="y"} value}). */
    private static void collect(String text, Map<String, Set<String>> into) {
        Pattern sample = Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)\\})? \\S+$");
        Pattern labelName = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"");
        for (String line : text.split("\n")) {
            Matcher m = sample.matcher(line);
            if (line.startsWith("#") || !m.matches()) {
                continue;
            }
            Set<String> labels = into.computeIfAbsent(m.group(1), k -> new HashSet<>());
            if (m.group(2) != null) {
                Matcher l = labelName.matcher(m.group(2));
                while (l.find()) {
                    labels.add(l.group(1));
                }
            }
        }
    }

    private static String daemonMetrics(Path dir) throws Exception {
        Settings settings = Settings.builder()
                .flag("server.bind", "127.0.0.1")
                .flag("server.port", "0")
                .flag("server.metrics-port", "0")
                .flag("server.store", "none")
                .flag("server.host-size", "64MiB")
                .flag("server.host-dir", dir.toString())
                .build();
        HiCacheServer server = HiCacheServer.start(ServerConfig.from(settings));
        try (RemotePageStore client = RemotePageStore.open(RemoteStoreConfig.local(server.port(), ""))) {
            Deadline deadline = Deadline.after(Duration.ofSeconds(10));
            assertTrue(client.daemonHealthy(deadline).get(10, TimeUnit.SECONDS));
            client.leadingHits(
                            List.of(Namespace.of("m", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1)
                                    .key(PageHash.fromHex("00".repeat(32)))),
                            deadline)
                    .get(10, TimeUnit.SECONDS);
            HttpResponse<String> scraped = HttpClient.newHttpClient()
                    .send(
                            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.metricsPort() + "/metrics"))
                                    .build(),
                            HttpResponse.BodyHandlers.ofString());
            assertEquals(200, scraped.statusCode());
            return scraped.body();
        } finally {
            server.close();
        }
    }

    private static String cacheMetrics(Path dir) throws Exception {
        PrometheusRegistry registry = new PrometheusRegistry();
        HiCacheConfig config = HiCacheConfig.from(Settings.builder()
                .flag("page-size", "4")
                .flag("prefetch-threshold", "4")
                .flag("host.dir", dir.toString())
                .build());
        // A store slow enough that a second request finds the first one's prefetch running (a skip, by reason),
        // and failing every call (a failure, by cause): the families with free-form labels get samples.
        PageStore store =
                new SlowPageStore(new FaultyPageStore(new InMemoryPageStore(64L << 20), 1.0, 0, 1), 300_000, 0);
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(64L << 20, 2);
                HiCache cache = HiCache.builder()
                        .config(config)
                        .namespace(Namespace.of("dashboard", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                        .geometry(KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16))
                        .devicePages(32)
                        .runtime(runtime)
                        .store(store)
                        .metrics(registry)
                        .open()) {
            try (var first = cache.request("first", new int[32]);
                    var second = cache.request("second", new int[32])) {
                assertTrue(first.deviceTokens() == 0 && second.deviceTokens() == 0);
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (cache.stats().failures().isEmpty() && System.nanoTime() < end) {
                    Thread.sleep(20);
                }
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            PrometheusTextFormatWriter.create().write(out, registry.scrape());
            return out.toString(StandardCharsets.UTF_8);
        }
    }
}
