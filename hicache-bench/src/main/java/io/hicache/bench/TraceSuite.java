package io.hicache.bench;

import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheBuilder;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.cache.Retention;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.testkit.BlockLru;
import io.hicache.testkit.Trace;
import io.hicache.testkit.TraceReplay;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * The {@code trace} suite (issue 40): a public trace replayed through the cache at device capacities from 16Ki to
 * 16Mi tokens, for three policies (the device tier alone; with a host tier four times its size, written through;
 * with an unbounded L3 besides), each against plain block-level LRU at the same capacity ({@link BlockLru}, which
 * reproduces the hit rates the trace publishes). The trace is the Mooncake conversation trace unless
 * {@code ./hicache bench trace --trace FILE} names another of its format. Hit rates count blocks of 512 tokens up to
 * each request's first miss; pages are one block. Deterministic: one fork is as good as three.
 *
 * <p>Retention (issue 42): every tenth conversation (a request whose second block id, the first that is its
 * conversation's own, is divisible by 10; block 0 is every request's) is tagged with priority 50 held 10 minutes of the
 * trace's time after each hit, and the device and host tiers are replayed with and without it at the same capacity;
 * rows give the tagged requests' hit rate and the others', each against the same replay without priorities.
 */
public final class TraceSuite implements BenchSuite {
    /** The system property that {@code --trace} sets for the forks. */
    public static final String TRACE_PROPERTY = "hicache.bench.trace";
    /**
     * The system property naming a folder for the host tiers' files (set it with {@code HICACHE_JAVA_OPTS}; forks
     * inherit it); without it, /dev/shm where there is one, else the temp folder.
     */
    public static final String HOST_DIR_PROPERTY = "hicache.bench.host-dir";

    private static final KvGeometry TINY = KvGeometry.mla(1, 8, 0, KvDtype.FP8_E4M3);
    private static final Namespace NS = Namespace.of("bench/trace", KvDtype.FP8_E4M3, PageByteOrder.LAYER_MAJOR, 0, 1);
    /** What the tagged conversations are made with. */
    private static final Retention TAGGED = Retention.of(50, Duration.ofMinutes(10));

    @Override
    public String name() {
        return "trace";
    }

    @Override
    public String description() {
        return "a public trace (Mooncake's conversation trace, or --trace FILE) replayed through the cache at "
                + "16Ki-16Mi tokens: device only, device and host, and with an L3, each against block LRU at that "
                + "capacity; and every tenth conversation at retention priority 50, against the same replay "
                + "without priorities";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        String file = System.getProperty(TRACE_PROPERTY);
        Trace trace = file == null ? Trace.mooncakeConversation() : Trace.read(Path.of(file));
        BlockLru ceiling = new BlockLru(Long.MAX_VALUE);
        trace.requests().forEach(r -> ceiling.serve(r.blocks()));
        List<BenchRow> rows = new ArrayList<>();
        long[] capacities = quick
                ? new long[] {64L << 10}
                : new long[] {16L << 10, 64L << 10, 256L << 10, 1L << 20, 4L << 20, 16L << 20};
        for (long tokens : capacities) {
            int pages = (int) (tokens / Trace.BLOCK_TOKENS);
            BlockLru lru = new BlockLru(pages);
            trace.requests().forEach(r -> lru.serve(r.blocks()));
            String cap = label(tokens);
            double device = replay(trace, pages, "device-only", false, new TraceReplay())
                    .hitRate();
            double host = replay(trace, pages, "host", false, new TraceReplay()).hitRate();
            double l3 = replay(trace, pages, "host", true, new TraceReplay()).hitRate();
            for (double rate : new double[] {device, host, l3}) {
                if (rate > ceiling.hitRate() + 1e-9) {
                    throw new IllegalStateException("a replay hit " + rate + ", over the trace's ceiling "
                            + ceiling.hitRate() + ": the replay is wrong");
                }
            }
            rows.add(BenchRow.higherIsBetter(
                    "trace_hit_rate_device_" + cap, device, "fraction", "block_lru_" + cap, lru.hitRate()));
            rows.add(BenchRow.higherIsBetter(
                    "trace_hit_rate_device_host_" + cap, host, "fraction", "block_lru_" + cap, lru.hitRate()));
            rows.add(BenchRow.higherIsBetter(
                    "trace_hit_rate_three_tiers_" + cap, l3, "fraction", "block_lru_" + cap, lru.hitRate()));
        }
        for (long tokens : quick ? new long[] {1L << 20} : new long[] {256L << 10, 1L << 20, 4L << 20}) {
            int pages = (int) (tokens / Trace.BLOCK_TOKENS);
            String cap = label(tokens);
            TraceReplay with = replay(trace, pages, "host", false, new TraceReplay().tag(TraceSuite::tagged, TAGGED));
            TraceReplay without =
                    replay(trace, pages, "host", false, new TraceReplay().tag(TraceSuite::tagged, Retention.NONE));
            rows.add(BenchRow.higherIsBetter(
                    "trace_retention_tagged_hit_rate_" + cap,
                    with.taggedHitRate(),
                    "fraction",
                    "no_priorities_" + cap,
                    without.taggedHitRate()));
            rows.add(BenchRow.higherIsBetter(
                    "trace_retention_rest_hit_rate_" + cap,
                    with.untaggedHitRate(),
                    "fraction",
                    "no_priorities_" + cap,
                    without.untaggedHitRate()));
        }
        rows.add(BenchRow.higherIsBetter(
                "trace_hit_rate_unbounded_ceiling", ceiling.hitRate(), "fraction", "published_36_6_percent", 0.366));
        return rows;
    }

    private static String label(long tokens) {
        return tokens >= 1L << 20 ? (tokens >> 20) + "mi" : (tokens >> 10) + "ki";
    }

    /**
     * Every tenth conversation: a request whose second block id (its conversation's first own block; the first block
     * is shared by every request of the conversation trace) is divisible by 10.
     */
    private static boolean tagged(Trace.Request r) {
        return r.blocks().length > 1 && r.blocks()[1] % 10 == 0;
    }

    /**
     * The trace through a cache of {@code pages} device pages: {@code tiers} device-only, or with a host tier, on the
     * trace's clock; returns {@code replay} having run.
     */
    private static TraceReplay replay(Trace trace, int pages, String tiers, boolean store, TraceReplay replay)
            throws Exception {
        String hostDir = System.getProperty(HOST_DIR_PROPERTY);
        Path host = Files.createTempDirectory(
                hostDir != null
                        ? Files.createDirectories(Path.of(hostDir))
                        : Files.isDirectory(Path.of("/dev/shm"))
                                ? Path.of("/dev/shm")
                                : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-bench-trace-");
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime((long) pages * 4096 * 2 + (64L << 20), 1)) {
            Settings.Builder s = Settings.builder()
                    .flag("page-size", Integer.toString(Trace.BLOCK_TOKENS))
                    .flag("host.dir", host.toString())
                    .flag("hicache-storage-prefetch-policy", "wait_complete")
                    .flag("prefetch-threshold", Integer.toString(Trace.BLOCK_TOKENS));
            if (tiers.equals("device-only")) {
                s.flag("hicache-tiers", "device-only");
            } else {
                s.flag("hicache-ratio", "4");
            }
            HiCacheBuilder b = HiCache.builder()
                    .config(HiCacheConfig.from(s.build()))
                    .namespace(NS)
                    .geometry(TINY)
                    .devicePages(pages)
                    .runtime(runtime)
                    .clock(replay.clock());
            if (store) {
                b.store(new InMemoryPageStore(64L << 30));
            }
            try (HiCache cache = b.open()) {
                return replay.run(cache, trace);
            }
        } finally {
            try (Stream<Path> all = Files.walk(host)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }
}
