package io.hicache.bench;

import io.hicache.core.HiCacheException;
import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.CacheStats;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheBuilder;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.WaitMode;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.testkit.SlowPageStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * {@code replay}: a multi-turn chat workload in the shape of SGLang's {@code bench_multiturn.py}. Many clients each
 * hold a conversation: a system prompt they all share, then rounds in which the prompt is the whole conversation so far plus new
 * input, and the answer joins the conversation. Clients take turns, so by a client's next round the others have
 * pushed its history out of a device pool sized at a quarter of the working set. Replayed twice in one run: with
 * device-only caching (the radix tree alone, evicted pages are lost) and with the three tiers (the cache on the
 * emulated device, a host pool of half the working set, an in-memory page store). Reports the share of prompt
 * tokens served from L1, L2 and L3 and the share computed, and the ratio of tokens served from cache. Stateless.
 */
public final class ReplaySuite implements BenchSuite {
    private static final int PAGE = 16;
    private static final int SYSTEM_TOKENS = 512;
    private static final int INPUT_TOKENS = 256;
    private static final int OUTPUT_TOKENS = 128;
    private static final KvGeometry GEOMETRY = KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16);

    @Override
    public String name() {
        return "replay";
    }

    @Override
    public String description() {
        return "multi-turn chat replay: prompt tokens served from L1/L2/L3 vs device-only caching, device at 1/4 of "
                + "the working set; the same with a slow L3, with a busy CPU, and with a restart halfway; requests the "
                + "cache failed";
    }

    /** Prompt tokens by where they came from, and requests the cache failed. */
    record Tally(long prompt, long device, long host, long storage, long failed, long adoptedPages, String l3) {
        long served() {
            return device + host + storage;
        }

        /** {@code part} as a percentage of the prompt tokens. */
        double share(long part) {
            return 100.0 * part / prompt;
        }
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        int clients = quick ? 8 : 48;
        int rounds = quick ? 3 : 6;
        int devicePages = devicePages(clients, rounds);
        List<int[]> workload = workload(clients, rounds);
        // The baseline: the cache in device-only mode (the radix tree on the device pool; what is evicted is gone).
        Tally deviceOnly = threeTiers(workload, devicePages, null, 0);
        Tally tiers = threeTiers(workload, devicePages, new InMemoryPageStore(8L << 30), 0);
        // An L3 as slow as the file store at small pages (~1 ms per call, 0.5 ms per page), and a busy CPU (one
        // spinning thread per core), each against the same replay with the fast store on an idle machine.
        Tally slow =
                threeTiers(workload, devicePages, new SlowPageStore(new InMemoryPageStore(8L << 30), 1_000, 500), 0);
        Tally contended = threeTiers(
                workload,
                devicePages,
                new InMemoryPageStore(8L << 30),
                Runtime.getRuntime().availableProcessors());
        // A restart in the middle (issue 19, part 3): device and host tiers, no page store, so that what the second
        // half is served past the device comes from the warm host tier; against the same replay without a restart.
        int half = workload.size() / 2;
        Tally unbroken = replay(workload, devicePages, null, "all", -1, half);
        Tally restarted = replay(workload, devicePages, null, "all", half, half);
        long adopted = restarted.adoptedPages();
        System.err.printf(
                "replay restart: second half served %d tokens with a restart (%d host pages adopted), %d "
                        + "without%n",
                restarted.served(), adopted, unbroken.served());
        List<BenchRow> rows = new ArrayList<>();
        rows.add(BenchRow.higherIsBetter(
                "replay_prompt_tokens_served_from_cache",
                tiers.served(),
                "tokens",
                "device_only_caching",
                deviceOnly.served()));
        rows.add(BenchRow.lowerIsBetter(
                "replay_prompt_tokens_computed",
                tiers.prompt - tiers.served(),
                "tokens",
                "device_only_caching",
                deviceOnly.prompt - deviceOnly.served()));
        // Shares of all prompt tokens (the reference is the whole: 100%).
        rows.add(BenchRow.higherIsBetter(
                "replay_three_tiers_share_from_l1", tiers.share(tiers.device), "%", "all", 100));
        rows.add(BenchRow.higherIsBetter("replay_three_tiers_share_from_l2", tiers.share(tiers.host), "%", "all", 100));
        rows.add(BenchRow.higherIsBetter(
                "replay_three_tiers_share_from_l3", tiers.share(tiers.storage), "%", "all", 100));
        rows.add(BenchRow.higherIsBetter(
                "replay_device_only_share_from_l1", deviceOnly.share(deviceOnly.device), "%", "all", 100));
        rows.add(BenchRow.higherIsBetter(
                "replay_slow_l3_served_tokens", slow.served(), "tokens", "fast_l3_idle_cpu", tiers.served()));
        rows.add(BenchRow.higherIsBetter(
                "replay_contended_served_tokens", contended.served(), "tokens", "fast_l3_idle_cpu", tiers.served()));
        rows.add(BenchRow.higherIsBetter(
                "replay_restart_served_tokens", restarted.served(), "tokens", "no_restart", unbroken.served()));
        rows.add(BenchRow.higherIsBetter(
                "replay_restart_warm_host_tokens",
                adopted * PAGE,
                "tokens",
                "served_after_restart",
                restarted.served()));
        long turns = workload.size();
        long failed =
                deviceOnly.failed + tiers.failed + slow.failed + contended.failed + unbroken.failed + restarted.failed;
        // The reference is every request of the four runs: the ratio is the share that failed (aim: 0).
        long run = 4 * turns + 2 * (turns - half);
        rows.add(new BenchRow(
                "replay_failed_requests", failed, "requests", "requests_run", run, (double) failed / run, "lower"));
        return rows;
    }

    /** The device pool of a replay of {@code clients} x {@code rounds}: a quarter of its working set. */
    static int devicePages(int clients, int rounds) {
        long workingSetTokens = (long) clients * (SYSTEM_TOKENS + (long) rounds * (INPUT_TOKENS + OUTPUT_TOKENS));
        return (int) (workingSetTokens / PAGE / 4);
    }

    /** The replay's cache settings: pages of {@value #PAGE}, the host pool in {@code hostDir}, {@code tiers}. */
    static Settings settings(Path hostDir, String tiers) {
        Settings.Builder b = Settings.builder()
                .flag("host.dir", hostDir.toString())
                .flag("page-size", Integer.toString(PAGE))
                .flag("hicache-ratio", "2")
                .flag("hicache-storage-prefetch-policy", "wait_complete")
                .flag("prefetch-threshold", "64")
                .flag("hicache-tiers", tiers);
        // -Dhicache.bench.device-free-target=F: the replays with hicache-device-free-target F (a TP 2 run's child
        // rank inherits it), to measure load-backs that find their pages free against the default
        String freeTarget = System.getProperty("hicache.bench.device-free-target");
        if (freeTarget != null && !tiers.equals("device-only")) {
            b.flag("hicache-device-free-target", freeTarget);
        }
        return b.build();
    }

    /**
     * Every turn's full sequence (prompt then answer), in the order the clients take turns. All clients share one
     * system prompt, as deployments usually do; each conversation then goes its own way.
     */
    static List<int[]> workload(int clients, int rounds) {
        SplittableRandom random = new SplittableRandom(7);
        int[] system = tokens(random, SYSTEM_TOKENS);
        List<int[]> history = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            history.add(system);
        }
        List<int[]> turns = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            for (int c = 0; c < clients; c++) {
                int[] prompt = concat(history.get(c), tokens(random, INPUT_TOKENS));
                int[] turn = concat(prompt, tokens(random, OUTPUT_TOKENS));
                turns.add(turn);
                history.set(c, turn);
            }
        }
        return turns;
    }

    /**
     * The cache on the emulated device, with a host pool of half the working set and {@code store} (closed here), or,
     * for a null store, in device-only mode; while {@code busyThreads} threads spin. A request the cache fails is
     * counted, closed, and the replay goes on.
     */
    private static Tally threeTiers(List<int[]> turns, int devicePages, @Nullable PageStore store, int busyThreads)
            throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> busy = new ArrayList<>();
        for (int i = 0; i < busyThreads; i++) {
            busy.add(Thread.ofPlatform().daemon().name("replay-busy-" + i).start(() -> {
                long x = 0;
                while (!stop.get()) {
                    x += System.nanoTime() % 7; // keep a core busy
                }
                if (x == 42) {
                    System.out.print("");
                }
            }));
        }
        try {
            return threeTiers(turns, devicePages, store);
        } finally {
            stop.set(true);
            for (Thread t : busy) {
                t.join();
            }
        }
    }

    private static Tally threeTiers(List<int[]> turns, int devicePages, @Nullable PageStore store) throws Exception {
        return replay(turns, devicePages, store, store == null ? "device-only" : "all", -1, 0);
    }

    /**
     * Replays {@code turns} through a cache of the given tiers (and {@code store}, closed here); with
     * {@code restartAt} at 0 or more, the cache is closed after that many turns and opened again over the same host
     * folder (a restart: the device tier is gone, the host tier comes back warm). Counts only the turns from
     * {@code countFrom} on (the page store's hits are counted over all turns: a run with a store counts from 0).
     */
    private static Tally replay(
            List<int[]> turns, int devicePages, @Nullable PageStore store, String tiers, int restartAt, int countFrom)
            throws Exception {
        if (store != null && countFrom != 0) {
            throw new IllegalArgumentException("the store's hits are counted over the whole replay");
        }
        Path dir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-replay");
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 2)) {
            return replayOn(
                    runtime, GEOMETRY, settings(dir, tiers), turns, devicePages, store, restartAt, countFrom, null);
        } finally {
            FileSuite.deleteTree(dir);
        }
    }

    /** Load-backs of a replay: bytes moved host to device and the time the requests waited for them. */
    static final class LoadTimer {
        long bytes;
        /** From asking for the load-back to its last layer on the device. */
        long nanos;
        /** Of that, from the load-back's start (pages allocated, copies submitted) to its end: the copies' share. */
        long copyNanos;
        /**
         * A diagnosis, not a figure: let background copies (the write-through backups) finish before each load-back,
         * so that its time shows what is left when it need not wait for them.
         */
        boolean quiesceFirst;
        /** A diagnostic too: when set, where the load-back calls spend their time (see {@link CallSampler}). */
        @Nullable
        CallSampler sampler;

        /**
         * How the replay waits for a load-back: parked (the default, for the emulated device on a small machine) or
         * spinning, as an engine's scheduler waits for a layer on a request's critical path (the GPU replay).
         */
        WaitMode waitMode = WaitMode.PARK;
        /** A diagnosis: the runtime's pools stamp each load's phases; null when not traced. */
        @Nullable
        LoadTracer tracer;
        /**
         * With a tracer: nanos summed over the load-backs from asking to the load's submission, submitting it, from
         * submitted to its first layer landed, to its last, and from then until the waiting thread saw it.
         */
        final long[] phases = new long[5];
        /** With a tracer: the load-backs that began with backups in flight, their bytes and their wait. */
        long withBackups;

        long withBackupsBytes;
        long withBackupsNanos;

        /** Load-backs timed, and by size: fewer than 8 pages, 8 to 31, 32 or more (count, bytes, nanos each). */
        long count;

        final long[][] bySize = new long[3][3];

        double gbps() {
            return nanos == 0 ? 0 : bytes / (double) nanos;
        }

        /** Adds the latest load's phases from the tracer, the load-back having begun at {@code start}, seen at end. */
        void trace(long start, long end, long loadBytes) {
            LoadTracer t = tracer;
            if (t == null) {
                return;
            }
            long[] p = {
                t.entered - start,
                t.returned - t.entered,
                t.firstLayer - t.returned,
                t.done - t.firstLayer,
                end - t.done
            };
            for (int i = 0; i < p.length; i++) {
                phases[i] += p[i];
            }
            if (t.backupsAtEntry > 0) {
                withBackups++;
                withBackupsBytes += loadBytes;
                withBackupsNanos += end - start;
            }
        }

        /** The traced phases, for the log: where a load-back's wait goes. */
        String phases() {
            if (tracer == null) {
                return "load phases not traced";
            }
            long idleBytes = bytes - withBackupsBytes;
            long idleNanos = nanos - withBackupsNanos;
            return String.format(
                    "load phases (ms over %d load-backs, %s wait): before the copy is asked for %.1f, submitting %.1f,"
                            + " to the first layer %.1f, to the last %.1f, the waiter's wake-up %.1f; %d load-backs"
                            + " began with backups in flight (%.2f GB at %.1f GB/s), %d without (%.2f GB at %.1f GB/s)",
                    count,
                    waitMode.name().toLowerCase(Locale.ROOT),
                    phases[0] / 1e6,
                    phases[1] / 1e6,
                    phases[2] / 1e6,
                    phases[3] / 1e6,
                    phases[4] / 1e6,
                    withBackups,
                    withBackupsBytes / 1e9,
                    withBackupsNanos == 0 ? 0 : withBackupsBytes / (double) withBackupsNanos,
                    count - withBackups,
                    idleBytes / 1e9,
                    idleNanos == 0 ? 0 : idleBytes / (double) idleNanos);
        }

        void add(long pages, long loadBytes, long loadNanos, long afterSubmitNanos) {
            count++;
            bytes += loadBytes;
            nanos += loadNanos;
            copyNanos += afterSubmitNanos;
            long[] bin = bySize[pages < 8 ? 0 : pages < 32 ? 1 : 2];
            bin[0]++;
            bin[1] += loadBytes;
            bin[2] += loadNanos;
        }

        /** How many load-backs of each size, their bytes and rate: where the time per byte goes. */
        String sizes() {
            String[] names = {"under 8 pages", "8-31 pages", "32+ pages"};
            StringBuilder b = new StringBuilder(count + " load-backs");
            for (int i = 0; i < 3; i++) {
                long[] bin = bySize[i];
                b.append(String.format(
                        "; %s: %d, %.2f GB in %.1f ms (%.1f GB/s)",
                        names[i], bin[0], bin[1] / 1e9, bin[2] / 1e6, bin[2] == 0 ? 0 : bin[1] / (double) bin[2]));
            }
            return b.toString();
        }
    }

    /**
     * {@link #replay} on {@code runtime} for a model of {@code geometry}, configured by {@code settings} (its host
     * folder the caller's); {@code loads}, if given, gets the load-backs' bytes and wait.
     */
    static Tally replayOn(
            DeviceRuntime runtime,
            KvGeometry geometry,
            Settings settings,
            List<int[]> turns,
            int devicePages,
            @Nullable PageStore store,
            int restartAt,
            int countFrom,
            @Nullable LoadTimer loads)
            throws Exception {
        return replayOn(
                runtime, geometry, settings, turns, devicePages, store, restartAt, countFrom, loads, null, null, null);
    }

    /**
     * As above, the cache being rank {@code group.rank()} of a tensor-parallel model whose ranks agree through
     * {@code group} (null: one rank), and reduce their prefetches' hits over {@code queries} (null: not);
     * {@code perTurn}, if given, gets each turn's prompt tokens, device hits, tokens loaded back and failure (1), in
     * order.
     */
    static Tally replayOn(
            DeviceRuntime runtime,
            KvGeometry geometry,
            Settings settings,
            List<int[]> turns,
            int devicePages,
            @Nullable PageStore store,
            int restartAt,
            int countFrom,
            @Nullable LoadTimer loads,
            @Nullable RankGroup group,
            @Nullable RankGroup queries,
            @Nullable List<long[]> perTurn)
            throws Exception {
        long[] counts = new long[5]; // prompt, device, loaded, storage, failed
        if (loads != null && loads.tracer != null) {
            runtime = loads.tracer; // it wraps the caller's runtime
        }
        long adopted;
        String l3;
        HiCache cache = open(settings, geometry, devicePages, runtime, store, group, queries);
        try {
            long storageBefore = cache.stats().storageHitTokens();
            for (int n = 0; n < turns.size(); n++) {
                if (n == restartAt) {
                    counts[3] += cache.stats().storageHitTokens() - storageBefore;
                    cache.close();
                    cache = open(
                            settings,
                            geometry,
                            devicePages,
                            runtime,
                            null,
                            group,
                            queries); // the store was the first cache's
                    storageBefore = cache.stats().storageHitTokens();
                }
                long[] turn = serve(cache, n, turns.get(n), loads);
                if (perTurn != null) {
                    perTurn.add(new long[] {turn[0], turn[1], turn[2], turn[4]});
                }
                if (n >= countFrom) {
                    for (int k = 0; k < 5; k++) {
                        counts[k] += k == 3 ? 0 : turn[k];
                    }
                }
            }
            counts[3] += cache.stats().storageHitTokens() - storageBefore;
            adopted = cache.stats().hostAdoptedPages();
            l3 = l3Summary(cache.stats());
        } finally {
            cache.close();
        }
        return new Tally(counts[0], counts[1], counts[2] - counts[3], counts[3], counts[4], adopted, l3);
    }

    /** What the page store did for a cache, for the log: uploads, prefetches by outcome, skips by reason, failures. */
    static String l3Summary(CacheStats s) {
        return "uploaded " + s.uploadedPages() + " pages (skipped " + s.uploadSkippedPages() + "), prefetches started "
                + s.prefetchesStarted() + " (completed " + s.prefetchesCompleted() + ", revoked "
                + s.prefetchesRevoked() + ", timed out " + s.prefetchesTimedOut() + ", empty " + s.prefetchesEmpty()
                + ", " + s.prefetchedPages() + " pages), skipped " + s.prefetchesSkipped() + ", failures "
                + s.failures();
    }

    private static HiCache open(
            Settings settings,
            KvGeometry geometry,
            int devicePages,
            DeviceRuntime runtime,
            @Nullable PageStore store,
            @Nullable RankGroup group,
            @Nullable RankGroup queries) {
        int rank = group == null ? 0 : group.rank();
        HiCacheBuilder b = HiCache.builder()
                .config(HiCacheConfig.from(settings))
                .namespace(Namespace.of(
                        "replay", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, rank, group == null ? 1 : group.size()))
                .geometry(geometry)
                .devicePages(devicePages)
                .runtime(runtime);
        if (group != null) {
            b.rankGroup(group);
        }
        if (queries != null) {
            b.prefetchRankGroup(queries);
        }
        return open(b, store);
    }

    /** One turn as an engine serves it; returns its prompt tokens, device hits, loaded tokens, 0, failures. */
    private static long[] serve(HiCache cache, int n, int[] turn, @Nullable LoadTimer loads) throws Exception {
        int[] promptTokens = Arrays.copyOf(turn, turn.length - OUTPUT_TOKENS);
        long[] out = new long[5];
        try (CacheRequest r = cache.request("turn-" + n, promptTokens)) {
            out[0] = promptTokens.length;
            int onDevice = r.deviceTokens();
            out[1] = onDevice;
            while (!r.tryEndPrefetch()) {
                Thread.sleep(0, 200_000);
            }
            if (loads != null && loads.quiesceFirst) {
                cache.awaitIdle(Duration.ofSeconds(30));
            }
            long loadStart = System.nanoTime();
            if (loads != null && loads.sampler != null) {
                loads.sampler.enter();
            }
            CacheRequest.LoadBack lb;
            try {
                lb = r.loadBack(Integer.MAX_VALUE);
            } finally {
                if (loads != null && loads.sampler != null) {
                    loads.sampler.leave();
                }
            }
            long submitted = System.nanoTime();
            if (!lb.await(Duration.ofSeconds(30), loads == null ? WaitMode.PARK : loads.waitMode)) {
                throw new IllegalStateException("a load-back did not finish");
            }
            out[2] = lb.deviceTokens() - onDevice;
            if (loads != null && out[2] > 0) {
                long end = System.nanoTime();
                long pages = out[2] / PAGE;
                loads.add(pages, pages * cache.format().pageBytes(), end - loadStart, end - submitted);
                loads.trace(loadStart, end, pages * cache.format().pageBytes());
            }
            int[] prefix = r.prefixPages();
            int whole = turn.length / PAGE;
            int[] fresh = r.allocate(whole - prefix.length);
            r.commit(Arrays.copyOf(turn, whole * PAGE), concat(prefix, fresh), true);
        } catch (HiCacheException e) {
            out[4] = 1; // the engine would recompute it; counted, never hidden
        }
        return out;
    }

    private static HiCache open(HiCacheBuilder builder, @Nullable PageStore store) {
        return (store == null ? builder : builder.store(store)).open();
    }

    private static int[] tokens(SplittableRandom random, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(152_064);
        }
        return t;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
