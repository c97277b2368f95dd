package io.hicache.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.CacheStats;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.cache.PrefetchSkip;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageStore;
import io.hicache.core.util.Checks;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaOptions;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.testkit.PagePattern;
import io.hicache.testkit.SlowPageStore;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * {@code GpuRun --experiment ttft} (issue 44, part 1): how soon a prompt's KV is on the GPU when it is restored from
 * each tier of an embedded cache on the CUDA runtime, against recomputing it. Llama-3.1-8B's KV geometry at TP 1 (32
 * layers, 8 KV heads of 128, bf16; pages of 16 tokens, 2 MiB), prompts of 4K, 16K and 32K tokens. The prefill times
 * (the reference of every row) and the daemon's rows come from {@code clients/python/interop/gpu_ttft.py}, run just
 * before on the same GPU, whose JSON {@code --python-results} names: a Llama-3.1-8B-shaped model with random weights
 * (plain PyTorch, flash attention through SDPA).
 *
 * <p>Per length, one cache (device pool of the prompt plus 64 pages, host pool twice that in /dev/shm, the file
 * store on disk, {@code wait_complete} prefetch): the prompt is committed once with a pattern in every page and backed
 * up to both tiers; then, timed from {@code request()} to the last layer on the device: a request that finds it on the
 * device ({@code device}); after another request's allocation pushed it off the device ({@code host}); after a
 * {@link io.hicache.core.cache.CacheAdmin#flush flush} left it in the file store only, with the OS page cache dropped
 * where this process may ({@code l3}). Then the cost-aware prefetch ({@code hicache-recompute-tokens-per-second} set to
 * the measured prefill rate at that length), over the file store and over the same store made slow ({@link
 * SlowPageStore}): the first request measures the store, the second is where the policy decides, restoring where that
 * is faster than prefill and recomputing where it is not; the {@code ttft_choice_*} rows compare what its choice cost
 * (the restore, or the decision then the prefill) with the better of the two. What is timed is the KV on the GPU: the
 * one forward step an engine still runs over restored KV before the first token is not. The restored pages of the
 * last run of each tier are compared with the pattern, every page. Stateless.
 */
final class GpuTtft {
    private static final KvGeometry LLAMA_3_1_8B = KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16);
    private static final int PAGE = 16;
    private static final long SEED = 0x77F7_0000L;
    /** The slow L3's delay per page of a call (2 MiB pages): a store well below the GPU's prefill rate. */
    private static final long SLOW_MICROS_PER_PAGE = 4_000;

    private GpuTtft() {}

    /** Prefill and daemon figures from the Python half of the run, in milliseconds by prompt length. */
    record PythonResults(
            String device,
            JsonNode prefillMs,
            JsonNode daemonLocalMs,
            JsonNode daemonTcpMs,
            JsonNode daemonL3Ms,
            JsonNode copyMs,
            boolean verified) {
        static PythonResults read(Path file) throws IOException {
            JsonNode root = new ObjectMapper().readTree(file.toFile());
            return new PythonResults(
                    root.path("device").asText("?"),
                    root.path("prefill_ms"),
                    root.path("daemon_local_ms"),
                    root.path("daemon_tcp_ms"),
                    root.path("daemon_l3_ms"),
                    root.path("copy_ms"),
                    root.path("verified").asBoolean(false));
        }

        double prefill(int tokens) {
            JsonNode n = prefillMs.path(Integer.toString(tokens));
            if (!n.isNumber()) {
                throw new IllegalStateException("the Python results have no prefill time for " + tokens + " tokens");
            }
            return n.asDouble();
        }
    }

    static List<BenchRow> run(boolean quick, Path pythonResults, PrintStream log) throws Exception {
        PythonResults py = PythonResults.read(pythonResults);
        log.printf(
                Locale.ROOT,
                "ttft: prefill figures from %s (%s), verified %s%n",
                pythonResults,
                py.device(),
                py.verified());
        try (CudaDeviceRuntime runtime = new CudaDeviceRuntime(CudaOptions.defaults())) {
            return run(
                    runtime,
                    LLAMA_3_1_8B,
                    quick ? new int[] {4096} : new int[] {4096, 16384, 32768},
                    quick ? 2 : 5,
                    py,
                    log);
        }
    }

    /** The experiment on any runtime and geometry (a test runs it small on the emulated device). */
    static List<BenchRow> run(
            DeviceRuntime runtime, KvGeometry geometry, int[] lengths, int repeats, PythonResults py, PrintStream log)
            throws Exception {
        List<BenchRow> rows = new ArrayList<>();
        for (int tokens : lengths) {
            rows.addAll(length(runtime, geometry, tokens, repeats, py, log));
        }
        for (int tokens : lengths) {
            String label = label(tokens);
            double prefill = py.prefill(tokens);
            daemonRow(rows, "ttft_restore_daemon_" + label, py.daemonLocalMs(), tokens, prefill);
            daemonRow(rows, "ttft_restore_daemon_tcp_" + label, py.daemonTcpMs(), tokens, prefill);
            daemonRow(rows, "ttft_restore_daemon_l3_" + label, py.daemonL3Ms(), tokens, prefill);
        }
        if (!py.verified()) {
            throw new IllegalStateException("the Python half's restores did not verify: its rows are not usable");
        }
        return rows;
    }

    private static void daemonRow(List<BenchRow> rows, String metric, JsonNode byLength, int tokens, double prefill) {
        JsonNode n = byLength.path(Integer.toString(tokens));
        if (n.isNumber()) {
            rows.add(BenchRow.lowerIsBetter(metric, n.asDouble(), "ms", "prefill_same_prompt", prefill)
                    .withAim(1.0));
        }
    }

    private static String label(int tokens) {
        return (tokens / 1024) + "k";
    }

    private static List<BenchRow> length(
            DeviceRuntime runtime, KvGeometry geometry, int tokens, int repeats, PythonResults py, PrintStream log)
            throws Exception {
        int pages = tokens / PAGE;
        double prefillMs = py.prefill(tokens);
        double recomputeTokensPerSecond = tokens / (prefillMs / 1e3);
        String label = label(tokens);
        int[] prompt = tokens(new SplittableRandom(tokens), tokens);
        Path hostDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-ttft-host");
        Path storeDir = Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "hicache-ttft-l3");
        List<BenchRow> rows = new ArrayList<>();
        try {
            double[] device = new double[repeats];
            double[] host = new double[repeats];
            double[] l3 = new double[repeats];
            boolean cold;
            long wrongHost;
            long wrongL3;
            Path pool = Files.createTempDirectory(hostDir, "pool");
            try (HiCache cache = open(runtime, geometry, pool, pages, store(storeDir, false), 0)) {
                commitWithPattern(cache, prompt, pages);
                if (!cache.awaitIdle(Duration.ofMinutes(2))) {
                    throw new IllegalStateException("the prompt's backups and uploads did not finish");
                }
                if (cache.stats().uploadedPages() < pages) {
                    throw new IllegalStateException("only " + cache.stats().uploadedPages() + " of the prompt's "
                            + pages + " pages reached the store: " + ReplaySuite.l3Summary(cache.stats()));
                }
                for (int i = 0; i < repeats; i++) {
                    device[i] = restore(cache, prompt, pages, "device").ms;
                }
                Restored last = null;
                for (int i = 0; i < repeats; i++) {
                    pushOffDevice(cache, pages, i);
                    last = restore(cache, prompt, pages, "host");
                    host[i] = last.ms;
                }
                wrongHost = Checks.checkNotNull(last, "the host restores (repeats >= 1)").wrongPages;
                cold = true;
                for (int i = 0; i < repeats; i++) {
                    cache.admin().flush(Duration.ofMinutes(1));
                    cold &= dropPageCache(runtime, log);
                    last = restore(cache, prompt, pages, "l3");
                    l3[i] = last.ms;
                }
                wrongL3 = Checks.checkNotNull(last, "the L3 restores (repeats >= 1)").wrongPages;
                CacheStats s = cache.stats();
                log.printf(
                        Locale.ROOT,
                        "ttft %s: device %s ms, host %s ms, l3 %s ms (page cache %s); prefill %.1f ms; wrong pages"
                                + " host %d, l3 %d; prefetches skipped %s%n",
                        label,
                        fmt(device),
                        fmt(host),
                        fmt(l3),
                        cold ? "dropped before each" : "NOT dropped: warm reads",
                        prefillMs,
                        wrongHost,
                        wrongL3,
                        s.prefetchesSkipped());
            } finally {
                FileSuite.deleteTree(pool); // the next cache's pool takes its place in /dev/shm
            }
            // The policy, over the file store and over the same store made slower than prefill: the first restore
            // measures the store, the second request is where the policy decides.
            Choice file = choice(
                    runtime,
                    geometry,
                    hostDir,
                    storeDir,
                    false,
                    prompt,
                    pages,
                    recomputeTokensPerSecond,
                    prefillMs,
                    log);
            Choice slow = choice(
                    runtime,
                    geometry,
                    hostDir,
                    storeDir,
                    true,
                    prompt,
                    pages,
                    recomputeTokensPerSecond,
                    prefillMs,
                    log);
            double hostMs = median(host);
            double l3Ms = median(l3);
            rows.add(BenchRow.lowerIsBetter(
                            "ttft_restore_device_" + label, median(device), "ms", "prefill_same_prompt", prefillMs)
                    .withAim(1.0));
            rows.add(
                    BenchRow.lowerIsBetter("ttft_restore_host_" + label, hostMs, "ms", "prefill_same_prompt", prefillMs)
                            .withAim(tokens == 16384 ? 0.2 : 1.0));
            rows.add(BenchRow.lowerIsBetter("ttft_restore_l3_" + label, l3Ms, "ms", "prefill_same_prompt", prefillMs)
                    .withAim(1.0));
            rows.add(BenchRow.wrongPages(
                    "ttft_restore_pages_with_wrong_bytes_" + label, wrongHost + wrongL3, 2L * pages));
            // What the policy's choice cost (the restore, or the decision then the prefill) against the better of the
            // two measured without it.
            rows.add(BenchRow.lowerIsBetter(
                            "ttft_choice_l3_" + label,
                            file.chosenMs(),
                            "ms",
                            "better_of_restore_and_prefill",
                            Math.min(l3Ms, prefillMs))
                    .withAim(1.1));
            rows.add(BenchRow.lowerIsBetter(
                            "ttft_choice_slow_l3_" + label,
                            slow.chosenMs(),
                            "ms",
                            "better_of_restore_and_prefill",
                            Math.min(slow.firstRestoreMs(), prefillMs))
                    .withAim(1.1));
            rows.add(BenchRow.lowerIsBetter(
                    "ttft_restore_slow_l3_" + label, slow.firstRestoreMs(), "ms", "prefill_same_prompt", prefillMs));
        } finally {
            FileSuite.deleteTree(hostDir);
            FileSuite.deleteTree(storeDir);
        }
        return rows;
    }

    /** What the cost-aware prefetch did on the second request for the prompt, once it had measured the store. */
    private record Choice(double firstRestoreMs, boolean recomputed, double chosenMs) {}

    private static Choice choice(
            DeviceRuntime runtime,
            KvGeometry geometry,
            Path hostDir,
            Path storeDir,
            boolean slow,
            int[] prompt,
            int pages,
            double recomputeTokensPerSecond,
            double prefillMs,
            PrintStream log)
            throws Exception {
        Path pool = Files.createTempDirectory(hostDir, "pool");
        try (HiCache cache = open(runtime, geometry, pool, pages, store(storeDir, slow), recomputeTokensPerSecond)) {
            dropPageCache(runtime, log);
            double first = restore(cache, prompt, pages, "l3").ms;
            cache.admin().flush(Duration.ofMinutes(1));
            dropPageCache(runtime, log);
            long t0 = System.nanoTime();
            boolean recomputed;
            double chosen;
            try (CacheRequest r = cache.request("ttft-decide", prompt)) {
                while (!r.tryEndPrefetch()) {
                    Thread.onSpinWait();
                }
                double decisionMs = (System.nanoTime() - t0) / 1e6;
                recomputed = cache.stats().prefetchesSkipped().getOrDefault(PrefetchSkip.SLOWER_THAN_RECOMPUTE, 0L) > 0;
                if (recomputed) {
                    chosen = decisionMs + prefillMs; // the engine recomputes the whole prompt
                } else {
                    CacheRequest.LoadBack lb = r.loadBack(Integer.MAX_VALUE);
                    if (!lb.await(Duration.ofMinutes(2))) {
                        throw new IllegalStateException("a load-back did not finish");
                    }
                    chosen = (System.nanoTime() - t0) / 1e6;
                    if (lb.deviceTokens() != pages * PAGE) {
                        throw new IllegalStateException(
                                "the policy restored " + lb.deviceTokens() + " of " + pages * PAGE + " tokens");
                    }
                }
            }
            log.printf(
                    Locale.ROOT,
                    "ttft %s %s: first restore %.1f ms (measures the store); then the policy %s: %.1f ms (prefill"
                            + " %.1f ms)%n",
                    label(prompt.length),
                    slow ? "slow l3 (" + SLOW_MICROS_PER_PAGE + " us per page late)" : "file l3",
                    first,
                    recomputed ? "chose to recompute" : "restored",
                    chosen,
                    prefillMs);
            return new Choice(first, recomputed, chosen);
        } finally {
            FileSuite.deleteTree(pool);
        }
    }

    private static PageStore store(Path dir, boolean slow) {
        PageStore file = FilePageStore.open(FileStoreConfig.at(dir).withCapacityBytes(64L << 30));
        return slow ? new SlowPageStore(file, 0, SLOW_MICROS_PER_PAGE) : file;
    }

    /**
     * A cache over {@code store}, its host pool in {@code poolDir}: a fresh folder for each cache, since a pool left by
     * an earlier cache would be taken up warm, and its pages would be host hits where the row means the store's.
     */
    private static HiCache open(
            DeviceRuntime runtime,
            KvGeometry geometry,
            Path poolDir,
            int pages,
            PageStore store,
            double recomputeTokensPerSecond) {
        Settings settings = Settings.builder()
                .flag("host.dir", poolDir.toString())
                .flag("page-size", Integer.toString(PAGE))
                .flag("hicache-ratio", "2")
                .flag("hicache-storage-prefetch-policy", "wait_complete")
                .flag("prefetch-threshold", "64")
                // the whole prompt goes to L3 at once: a queue smaller than it would drop uploads (the rows are about
                // restoring, not about a store slower than the cache writes)
                .flag("hicache-upload-queue-bytes", Long.toString(2L * pages * PAGE * geometry.tokenBytes()))
                .flag(
                        "hicache-recompute-tokens-per-second",
                        String.format(Locale.ROOT, "%.1f", recomputeTokensPerSecond))
                .build();
        return HiCache.builder()
                .config(HiCacheConfig.from(settings))
                .namespace(Namespace.of("ttft", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                .geometry(geometry)
                .devicePages(pages + 64)
                .runtime(runtime)
                .store(store)
                .open();
    }

    /** Commits the prompt as an engine would after its prefill, with the page pattern in every page. */
    private static void commitWithPattern(HiCache cache, int[] prompt, int pages) {
        try (CacheRequest r = cache.request("ttft-prefill", prompt);
                Arena arena = Arena.ofConfined()) {
            int[] fresh = r.allocate(pages);
            MemorySegment flat = arena.allocate(cache.device().pageBytes(), 64);
            for (int i = 0; i < pages; i++) {
                PagePattern.fill(flat, SEED + i);
                cache.device().writePage(fresh[i], flat);
            }
            r.commit(prompt, fresh, true);
        }
    }

    /** Another request takes the device's free pages and more, so the prompt's pages go (they are backed up). */
    private static void pushOffDevice(HiCache cache, int pages, int round) throws InterruptedException {
        int[] other = tokens(new SplittableRandom(1000 + round), pages * PAGE);
        try (CacheRequest r = cache.request("ttft-other-" + round, other)) {
            r.allocate(pages + 64); // the whole pool; not committed: the pages are free again when it closes
        }
        if (!cache.awaitIdle(Duration.ofMinutes(1))) {
            throw new IllegalStateException("the cache did not settle");
        }
    }

    private record Restored(double ms, long wrongPages) {}

    /** One request for the prompt, timed from its start to the last layer on the device; checks every page. */
    private static Restored restore(HiCache cache, int[] prompt, int pages, String tier) throws Exception {
        long t0 = System.nanoTime();
        long wrong;
        double ms;
        try (CacheRequest r = cache.request("ttft-" + tier, prompt)) {
            while (!r.tryEndPrefetch()) {
                Thread.onSpinWait();
            }
            CacheRequest.LoadBack lb = r.loadBack(Integer.MAX_VALUE);
            if (!lb.await(Duration.ofMinutes(2))) {
                throw new IllegalStateException("a load-back did not finish");
            }
            ms = (System.nanoTime() - t0) / 1e6;
            if (lb.deviceTokens() != pages * PAGE) {
                throw new IllegalStateException(tier + ": " + lb.deviceTokens() + " of " + pages * PAGE
                        + " tokens on the device after the load-back");
            }
            wrong = mismatched(cache, r.prefixPages());
        }
        return new Restored(ms, wrong);
    }

    private static long mismatched(HiCache cache, int[] devicePages) {
        long wrong = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment flat = arena.allocate(cache.device().pageBytes(), 64);
            for (int i = 0; i < devicePages.length; i++) {
                flat.fill(PagePattern.SENTINEL);
                cache.device().readPage(devicePages[i], flat);
                if (PagePattern.firstMismatch(flat, SEED + i) >= 0) {
                    wrong++;
                }
            }
        }
        return wrong;
    }

    /**
     * Drops the OS page cache so that L3 reads come from the disk; false where this process may not. Only on the GPU
     * machine (a CUDA runtime): the emulated runs are tests on shared machines.
     */
    private static boolean dropPageCache(DeviceRuntime runtime, PrintStream log) {
        if (!(runtime instanceof CudaDeviceRuntime)) {
            return false;
        }
        try {
            Process p = new ProcessBuilder("sh", "-c", "sync && echo 1 > /proc/sys/vm/drop_caches")
                    .redirectErrorStream(true)
                    .start();
            p.getInputStream().transferTo(PrintStream.nullOutputStream());
            return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            log.println("ttft: could not drop the page cache: " + e);
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static int[] tokens(SplittableRandom random, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(128_256);
        }
        return t;
    }

    private static double median(double[] values) {
        double[] v = values.clone();
        Arrays.sort(v);
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    private static String fmt(double[] ms) {
        StringBuilder b = new StringBuilder();
        for (double m : ms) {
            b.append(b.isEmpty() ? "" : "/").append(String.format(Locale.ROOT, "%.1f", m));
        }
        return b.toString();
    }
}
