package io.hicache.bench.server;

import io.hicache.bench.BenchRow;
import io.hicache.bench.Progress;
import io.hicache.bench.ServerProcess;
import io.netty.buffer.ByteBuf;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * The {@code server} suite's scale rows (issue 22, part 7): a daemon of its own with an 8 GiB slab ({@code
 * --server.store none}: no L3, so eviction drops pages) under one-page PUTs of 16 KiB from the suite's load generator
 * (HCWP, 16 connections x 4 in flight), fresh keys throughout.
 * <ul>
 *   <li>Not evicting: rounds of 256 MiB of puts (3% of the slab), each followed by CLEAR_ALL (untimed), so the slab
 *   is never more than that full; warm-up rounds first (a fresh JVM).</li>
 *   <li>Evicting: the slab filled past its size with more puts (untimed), then the same rounds without clearing,
 *   so that every put has the slab drop its least recently used pages.</li>
 * </ul>
 * Rows: {@code server_evicting_put_16k} (puts/s, the median round; reference the not-evicting median; aim at least
 * 0.5) and {@code server_evicting_put_16k_p99} (ms over every put of the measured rounds; reference the not-evicting
 * p99; aim at most 2). Checked: the daemon counts no eviction in the not-evicting rounds and some in the evicting
 * ones ({@code hicache_server_evicted_pages_total}), and a page set after the run reads back byte for byte
 * ({@link PageCheck}).
 *
 * <p>Needs the slab's 8 GiB free in {@code /dev/shm} and in memory, with 1 GiB to spare: without them the rows are
 * skipped with a line on stderr, never failed. System property {@value #PROPERTY}: {@code off} skips them,
 * {@code only} runs them alone (the suite's other rows are not measured). Stateless.
 */
final class EvictingRows {
    /** {@code on} (the default), {@code off} or {@code only}. */
    static final String PROPERTY = "hicache.bench.server.evicting";

    private static final long SLAB_BYTES = 8L << 30;
    private static final long SPARE_BYTES = 1L << 30;
    private static final int PAGE_BYTES = 16 * 1024;
    private static final int ROUND_PAGES = 16 * 1024;
    private static final int BODIES = 8;
    /** Pages put to fill the slab before the evicting rounds: its size and a sixteenth more. */
    private static final long FILL_PAGES = SLAB_BYTES / PAGE_BYTES * 17 / 16;

    private static final double THROUGHPUT_AIM = 0.5;
    private static final double P99_AIM = 2.0;

    private EvictingRows() {}

    /** Whether {@value #PROPERTY} asks for these rows and nothing else of the suite. */
    static boolean only() {
        return "only".equals(System.getProperty(PROPERTY, "on"));
    }

    static void run(boolean quick, List<BenchRow> rows) throws Exception {
        String setting = System.getProperty(PROPERTY, "on");
        if (setting.equals("off")) {
            System.err.println("server: the evicting rows are skipped (" + PROPERTY + "=off)");
            return;
        }
        String lacking = roomLacking();
        if (lacking != null) {
            System.err.println("server: the evicting rows are skipped: " + lacking);
            return;
        }
        int warmup = quick ? 2 : 8;
        int measured = quick ? 2 : 6;
        ByteBuf[] bodies = new ByteBuf[BODIES];
        int[] crcs = ServerSuite.randomBodies(PAGE_BYTES, bodies);
        HcwpProtocol protocol = new HcwpProtocol();
        try (ServerProcess daemon = ServerProcess.hicache(SLAB_BYTES, List.of("--server.metrics-port", "0"));
                LoadGenerator load =
                        LoadGenerator.connect(protocol, daemon.port, ServerSuite.CONNECTIONS, ServerSuite.DEPTH)) {
            Metrics metrics = new Metrics(daemon.metricsPort);
            int total = warmup + 2 * measured + 1;
            int done = 0;
            long[] next = {0}; // keys are (round, index) with a round number never used twice
            List<Double> calm = new ArrayList<>();
            List<long[]> calmLatency = new ArrayList<>();
            double mostUsed = 0;
            for (int r = 0; r < warmup + measured; r++) {
                LoadGenerator.Phase put = ServerSuite.setRound(load, protocol, next[0]++, ROUND_PAGES, bodies, crcs);
                double slab = metrics.value("hicache_server_slab_bytes");
                mostUsed = Math.max(mostUsed, (slab - metrics.value("hicache_server_slab_free_bytes")) / slab);
                load.run(1, (alloc, id, index) -> new ByteBuf[] {protocol.flushAll(alloc, id)});
                if (r >= warmup) {
                    calm.add(ROUND_PAGES * 1e9 / put.nanos());
                    calmLatency.add(put.latencyNanos());
                }
                Progress.roundDone(++done, total);
            }
            double evictedCalm = metrics.value("hicache_server_evicted_pages_total");
            if (evictedCalm != 0) {
                throw new IllegalStateException(
                        "the daemon evicted " + evictedCalm + " pages in the not-evicting rounds");
            }
            long fillStart = System.nanoTime();
            for (long put = 0; put < FILL_PAGES; put += ROUND_PAGES) {
                ServerSuite.setRound(
                        load, protocol, next[0]++, (int) Math.min(ROUND_PAGES, FILL_PAGES - put), bodies, crcs);
            }
            double fillSeconds = (System.nanoTime() - fillStart) / 1e9;
            Progress.roundDone(++done, total);
            double evictedBefore = metrics.value("hicache_server_evicted_pages_total");
            if (evictedBefore == 0) {
                throw new IllegalStateException("the daemon evicted nothing while " + FILL_PAGES + " pages of "
                        + PAGE_BYTES + " bytes were put into its slab of " + SLAB_BYTES + " bytes");
            }
            List<Double> evicting = new ArrayList<>();
            List<long[]> evictingLatency = new ArrayList<>();
            for (int r = 0; r < measured; r++) {
                LoadGenerator.Phase put = ServerSuite.setRound(load, protocol, next[0]++, ROUND_PAGES, bodies, crcs);
                evicting.add(ROUND_PAGES * 1e9 / put.nanos());
                evictingLatency.add(put.latencyNanos());
                Progress.roundDone(++done, total);
            }
            double evicted = metrics.value("hicache_server_evicted_pages_total") - evictedBefore;
            if (evicted < (double) measured * ROUND_PAGES / 2) {
                throw new IllegalStateException("the daemon evicted " + evicted + " pages in evicting rounds of "
                        + measured * ROUND_PAGES + " puts: the slab was not full");
            }
            PageCheck.verify(daemon.name, daemon.port, load, protocol, bodies[1], crcs[1]);
            long[] calmSorted = ServerSuite.pooled(calmLatency);
            long[] evictingSorted = ServerSuite.pooled(evictingLatency);
            double calmP99 = ServerSuite.percentile(calmSorted, 0.99) / 1e6;
            double evictingP99 = ServerSuite.percentile(evictingSorted, 0.99) / 1e6;
            System.err.printf(
                    Locale.ROOT,
                    "server: evicting rows: slab at most %.1f%% full in the not-evicting rounds; "
                            + "filled %d pages in %.1f s; %.0f pages evicted in the evicting rounds of %d puts; puts/s "
                            + "not evicting %s, evicting %s; ms p50/p99.9/max not evicting %s, evicting %s%n",
                    100 * mostUsed,
                    FILL_PAGES,
                    fillSeconds,
                    evicted,
                    measured * ROUND_PAGES,
                    rounded(calm),
                    rounded(evicting),
                    tail(calmSorted),
                    tail(evictingSorted));
            rows.add(BenchRow.higherIsBetter(
                            "server_evicting_put_16k",
                            ServerSuite.median(evicting),
                            "puts/s",
                            "not_evicting_put_16k",
                            ServerSuite.median(calm))
                    .withAim(THROUGHPUT_AIM));
            rows.add(BenchRow.lowerIsBetter(
                            "server_evicting_put_16k_p99", evictingP99, "ms", "not_evicting_put_16k_p99", calmP99)
                    .withAim(P99_AIM));
        } finally {
            for (ByteBuf b : bodies) {
                b.release();
            }
        }
    }

    /** Why the slab would not fit here, or null when it does. */
    static @Nullable String roomLacking() throws IOException {
        Path shm = Path.of("/dev/shm");
        if (!Files.isDirectory(shm) || !Files.isWritable(shm)) {
            return "no writable /dev/shm for the daemon's 8 GiB slab";
        }
        long free = Files.getFileStore(shm).getUsableSpace();
        if (free < SLAB_BYTES + SPARE_BYTES) {
            return String.format(
                    Locale.ROOT,
                    "/dev/shm has %.1f GiB free, the 8 GiB slab needs %.1f",
                    free / 1073741824.0,
                    (SLAB_BYTES + SPARE_BYTES) / 1073741824.0);
        }
        long available = memAvailable();
        if (available >= 0 && available < SLAB_BYTES + SPARE_BYTES) {
            return String.format(
                    Locale.ROOT,
                    "%.1f GiB of memory available (MemAvailable), the 8 GiB slab needs %.1f",
                    available / 1073741824.0,
                    (SLAB_BYTES + SPARE_BYTES) / 1073741824.0);
        }
        return null;
    }

    /** MemAvailable from /proc/meminfo in bytes, or -1 where there is none. */
    private static long memAvailable() throws IOException {
        Path meminfo = Path.of("/proc/meminfo");
        if (!Files.isReadable(meminfo)) {
            return -1;
        }
        for (String line : Files.readAllLines(meminfo)) {
            if (line.startsWith("MemAvailable:")) {
                return Long.parseLong(line.replaceAll("\\D", "")) * 1024;
            }
        }
        return -1;
    }

    private static String tail(long[] sorted) {
        return String.format(
                Locale.ROOT,
                "%.2f/%.2f/%.2f",
                ServerSuite.percentile(sorted, 0.5) / 1e6,
                ServerSuite.percentile(sorted, 0.999) / 1e6,
                sorted[sorted.length - 1] / 1e6);
    }

    private static String rounded(List<Double> values) {
        return values.stream()
                .map(v -> String.format(Locale.ROOT, "%.0f", v))
                .toList()
                .toString();
    }

    /** The daemon's Prometheus text, one value at a time. */
    private record Metrics(int port) {
        private static final HttpClient HTTP =
                HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

        Metrics {
            if (port < 0) {
                throw new IllegalStateException("the daemon serves no metrics");
            }
        }

        /** The value of the sample named {@code name} (no labels). */
        double value(String name) throws IOException, InterruptedException {
            HttpResponse<String> r = HTTP.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"))
                            .timeout(Duration.ofSeconds(10))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            for (String line : r.body().split("\n")) {
                if (line.startsWith(name + " ")) {
                    return Double.parseDouble(
                            line.substring(name.length() + 1).strip().split(" ")[0]);
                }
            }
            throw new IllegalStateException("the daemon's metrics have no " + name);
        }
    }
}
