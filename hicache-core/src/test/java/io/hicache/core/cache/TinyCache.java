package io.hicache.core.cache;

import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.rank.LocalRankGroup;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.PageStore;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;

/**
 * A small cache for this package's tests: pages of 4 tokens, an emulated device, a clock the test moves, and a host
 * pool (when it has one) in a folder under {@code target} that goes with the cache. {@link #serve} drives a request as
 * an engine does. Not thread-safe.
 */
final class TinyCache implements AutoCloseable {
    static final int PAGE = 4;
    private static final KvGeometry GEOMETRY = KvGeometry.mha(1, 1, 8, KvDtype.BFLOAT16);

    final ManualClock clock = new ManualClock();
    final HiCache cache;
    private final EmulatedDeviceRuntime runtime;
    private final @Nullable Path hostDir;
    private int served;

    /** The clock the cache measures retention on; starts at 0 and moves only when told. */
    static final class ManualClock implements InstantSource {
        private volatile long millis;

        void advance(Duration by) {
            millis += by.toMillis();
        }

        @Override
        public long millis() {
            return millis;
        }

        @Override
        public Instant instant() {
            return Instant.ofEpochMilli(millis);
        }
    }

    private TinyCache(
            int devicePages, boolean host, @Nullable PageStore store, @Nullable RankGroup ranks, String... settings)
            throws IOException {
        this.runtime = new EmulatedDeviceRuntime(8L << 20, 1);
        this.hostDir =
                host ? Files.createTempDirectory(Files.createDirectories(Path.of("target")), "tiny-cache-") : null;
        Settings.Builder s = Settings.builder().flag("page-size", Integer.toString(PAGE));
        if (hostDir == null) {
            s.flag("hicache-tiers", "device-only");
        } else {
            s.flag("host.dir", hostDir.toString()).flag("host.keep", "false");
        }
        for (int i = 0; i < settings.length; i += 2) {
            s.flag(settings[i], settings[i + 1]);
        }
        HiCacheBuilder b = HiCache.builder()
                .config(HiCacheConfig.from(s.build()))
                .namespace(Namespace.of(
                        "tiny",
                        KvDtype.BFLOAT16,
                        PageByteOrder.LAYER_MAJOR,
                        ranks == null ? 0 : ranks.rank(),
                        ranks == null ? 1 : ranks.size()))
                .geometry(GEOMETRY)
                .devicePages(devicePages)
                .runtime(runtime)
                .metrics(new PrometheusRegistry())
                .clock(clock);
        if (store != null) {
            b.store(store);
        }
        if (ranks != null) {
            b.rankGroup(ranks);
        }
        this.cache = b.open();
    }

    /** A cache with a device tier alone. */
    static TinyCache deviceOnly(int devicePages) throws IOException {
        return new TinyCache(devicePages, false, null, null);
    }

    /** A cache with a device tier alone, one of the tensor-parallel ranks of {@code ranks}. */
    static TinyCache deviceOnly(int devicePages, RankGroup ranks) throws IOException {
        return new TinyCache(devicePages, false, null, ranks);
    }

    /** A cache with a host tier (and {@code store} as its L3, if any), and {@code settings} as name-value pairs. */
    static TinyCache withHost(int devicePages, @Nullable PageStore store, String... settings) throws IOException {
        return new TinyCache(devicePages, true, store, null, settings);
    }

    /** A cache with a host tier, one of the tensor-parallel ranks of {@code ranks}, and {@code settings}. */
    static TinyCache withHostAsRank(int devicePages, RankGroup ranks, String... settings) throws IOException {
        return new TinyCache(devicePages, true, null, ranks, settings);
    }

    /** What one rank of {@link #onRanks} does, and says. */
    interface RankBody {
        String run(RankGroup group) throws Exception;
    }

    /**
     * Runs {@code body} on each of {@code count} in-process ranks at once (each its own thread, all one rank group);
     * returns what each said, in rank order.
     */
    static List<String> onRanks(String name, int count, RankBody body) throws Exception {
        List<RankGroup> groups = LocalRankGroup.create(name, count);
        ExecutorService threads = Executors.newFixedThreadPool(count);
        try {
            List<Future<String>> said = new ArrayList<>();
            for (RankGroup g : groups) {
                said.add(threads.submit(() -> body.run(g)));
            }
            List<String> out = new ArrayList<>();
            for (Future<String> f : said) {
                out.add(f.get(60, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            threads.shutdownNow();
            groups.forEach(RankGroup::close);
        }
    }

    /** {@code pages} whole pages of tokens {@code base, base + 1, ...}. */
    static int[] prompt(int base, int pages) {
        int[] t = new int[pages * PAGE];
        Arrays.setAll(t, i -> base + i);
        return t;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /**
     * Serves {@code tokens} as an engine would, with {@code retention}: request, load back what the host has, reuse
     * the device prefix, compute (allocate) the rest, commit, close. Returns the prompt tokens found cached.
     */
    int serve(int[] tokens, Retention retention) throws InterruptedException {
        try (CacheRequest r = cache.request("r" + served++, "", tokens, retention)) {
            while (!r.tryEndPrefetch()) {
                Thread.sleep(1);
            }
            if (!r.loadBack(Integer.MAX_VALUE).await(Duration.ofSeconds(10))) {
                throw new IllegalStateException("a load-back did not end");
            }
            int[] prefix = r.prefixPages();
            int whole = tokens.length / PAGE;
            int[] pages = Arrays.copyOf(prefix, whole);
            int[] fresh = r.allocate(whole - prefix.length);
            System.arraycopy(fresh, 0, pages, prefix.length, fresh.length);
            r.commit(Arrays.copyOf(tokens, whole * PAGE), pages, true);
            return prefix.length * PAGE;
        }
    }

    int serve(int[] tokens) throws InterruptedException {
        return serve(tokens, Retention.NONE);
    }

    /** Leading tokens of {@code tokens} on the device now (read without a hit). */
    int onDevice(int[] tokens) {
        return cache.prefixHitsInMemory("", tokens).deviceTokens();
    }

    /** Leading tokens of {@code tokens} with a finished copy on the host now (read without a hit). */
    int onHost(int[] tokens) {
        return cache.prefixHitsInMemory("", tokens).hostTokens();
    }

    /** Waits for background copies and uploads, then checks the tree and every page's owner. */
    void settle() throws InterruptedException {
        if (!cache.awaitIdle(Duration.ofSeconds(10))) {
            throw new IllegalStateException("the cache did not become idle");
        }
        cache.core().checkConsistency();
    }

    @Override
    public void close() throws IOException {
        try {
            cache.close();
            runtime.close();
        } finally {
            if (hostDir != null && Files.exists(hostDir)) {
                try (Stream<Path> all = Files.walk(hostDir)) {
                    for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(p);
                    }
                }
            }
        }
    }
}
