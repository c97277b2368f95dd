package io.hicache.bench;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.WaitMode;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.cuda.ContiguousCopy;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaOptions;
import io.hicache.cuda.CudaTuning;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * {@code GpuRun --experiment replay} (issue 19, part 7, TP 1): the replay suite's multi-turn chat workload through a
 * cache on the CUDA runtime, for Llama-3.1-8B's geometry at TP 1 (32 layers, 8 KV heads of 128, bf16; pages of 16
 * tokens, 2 MiB): the device pool in GPU memory (a quarter of the working set), a pinned host pool of half of it in
 * /dev/shm, and the file store on the machine's disk. Rows: tokens served from cache against device-only caching in
 * the same run ({@code gpu_replay_cached_tokens_tp1}, aim at least 2), and the load-backs' bandwidth (bytes loaded
 * over the time requests waited for them) against one contiguous pinned copy to the device measured in the same run
 * ({@code gpu_replay_loadback_gbps_tp1}, aim at least 0.8). The engine's compute is left out: pages are allocated and
 * committed, not written. Stateless.
 */
final class GpuReplay {
    private static final KvGeometry LLAMA_3_1_8B = KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16);

    private GpuReplay() {}

    static List<BenchRow> run(boolean quick) throws Exception {
        int clients = quick ? 8 : 48;
        int rounds = quick ? 3 : 6;
        List<int[]> workload = ReplaySuite.workload(clients, rounds);
        long tokens = workload.getLast().length; // one conversation's length, for the log
        int devicePages = ReplaySuite.devicePages(clients, rounds);
        List<BenchRow> rows = new ArrayList<>();
        Path hostDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-gpu-replay");
        Path storeDir = Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "hicache-gpu-l3");
        try (CudaDeviceRuntime runtime = new CudaDeviceRuntime(cudaOptions())) {
            ReplaySuite.Tally deviceOnly = ReplaySuite.replayOn(
                    runtime,
                    LLAMA_3_1_8B,
                    ReplaySuite.settings(hostDir, "device-only"),
                    workload,
                    devicePages,
                    null,
                    -1,
                    0,
                    null);
            ReplaySuite.LoadTimer loads = loadTimer(runtime);
            // -Dhicache.bench.gpu-replay.quiesce-before-load=true: a diagnosis of what a load-back waits for
            loads.quiesceFirst = Boolean.getBoolean("hicache.bench.gpu-replay.quiesce-before-load");
            // -Dhicache.bench.gpu-replay.sample-loads=true: another diagnosis, where the loadBack calls spend their
            // time
            loads.sampler = Boolean.getBoolean("hicache.bench.gpu-replay.sample-loads") ? new CallSampler() : null;
            ReplaySuite.Tally tiers = ReplaySuite.replayOn(
                    runtime,
                    LLAMA_3_1_8B,
                    ReplaySuite.settings(hostDir, "all"),
                    workload,
                    devicePages,
                    FilePageStore.open(FileStoreConfig.at(storeDir).withCapacityBytes(48L << 30)),
                    -1,
                    0,
                    loads);
            if (loads.sampler != null) {
                loads.sampler.close();
                System.err.println("gpu replay: where loadBack spent its time (sampled every 200 us):");
                loads.sampler.top(25).forEach(line -> System.err.println("  " + line));
            }
            double contiguous = contiguousGbps(runtime, Math.min(loads.bytes, 1L << 30));
            System.err.printf(
                    "gpu replay: %d clients x %d rounds (%d tokens per conversation at the end), device pool %d"
                            + " pages of 2 MiB; served %d tokens (device %d, host %d, store %d) vs device-only %d; loads %d"
                            + " bytes in %.1f ms (%.2f GB/s; %.1f ms of it after the copies were submitted) vs contiguous %.2f GB/s;"
                            + " failed %d + %d%n",
                    clients,
                    rounds,
                    tokens,
                    devicePages,
                    tiers.served(),
                    tiers.device(),
                    tiers.host(),
                    tiers.storage(),
                    deviceOnly.served(),
                    loads.bytes,
                    loads.nanos / 1e6,
                    loads.gbps(),
                    loads.copyNanos / 1e6,
                    contiguous,
                    tiers.failed(),
                    deviceOnly.failed());
            System.err.println("gpu replay TP 1 page store: " + tiers.l3());
            System.err.println("gpu replay TP 1 " + loads.sizes());
            System.err.println("gpu replay TP 1 " + loads.phases());
            rows.add(BenchRow.higherIsBetter(
                            "gpu_replay_cached_tokens_tp1",
                            tiers.served(),
                            "tokens",
                            "device_only_caching",
                            deviceOnly.served())
                    .withAim(2.0));
            rows.add(BenchRow.higherIsBetter(
                            "gpu_replay_loadback_gbps_tp1", loads.gbps(), "GB/s", "contiguous_pinned_copy", contiguous)
                    .withAim(0.8));
            rows.add(BenchRow.higherIsBetter(
                    "gpu_replay_share_from_l1_tp1", tiers.share(tiers.device()), "%", "all", 100));
            rows.add(BenchRow.higherIsBetter(
                    "gpu_replay_share_from_l2_tp1", tiers.share(tiers.host()), "%", "all", 100));
            rows.add(BenchRow.higherIsBetter(
                    "gpu_replay_share_from_l3_tp1", tiers.share(tiers.storage()), "%", "all", 100));
            long failed = tiers.failed() + deviceOnly.failed();
            rows.add(new BenchRow(
                    "gpu_replay_failed_requests_tp1",
                    failed,
                    "requests",
                    "requests_run",
                    2L * workload.size(),
                    failed / (2.0 * workload.size()),
                    "lower"));
            // TP 1's store leaves the disk before TP 2's two stores start writing to it.
            FileSuite.deleteTree(storeDir);
            boolean two = secondGpu();
            if (!two) {
                System.err.println("gpu replay: one GPU here: TP 2 runs both ranks on it (rows *_tp2_one_gpu)");
            }
            rows.addAll(tp2(runtime, two, clients, rounds, workload.size()));
        } finally {
            FileSuite.deleteTree(hostDir);
            FileSuite.deleteTree(storeDir);
        }
        return rows;
    }

    /**
     * {@link CudaOptions#defaults()}, with {@code -Dhicache.bench.gpu-replay.layers-per-launch=N}: loads launched N
     * layers at a time ({@link CudaTuning#layersPerLoadLaunch}), to measure fewer launches per load-back against one
     * per layer; and {@code -Dhicache.bench.gpu-replay.backup-blocks-per-sm=N} with {@code
     * -Dhicache.bench.gpu-replay.prioritize-loads=BOOL}: how backups share the device with loads
     * ({@link CudaTuning#backupBlocksPerMultiprocessor}; 8 and false were the shape before). TP 2's second rank (a
     * child JVM) inherits the properties.
     */
    static CudaOptions cudaOptions() {
        CudaOptions d = CudaOptions.defaults();
        CudaTuning t = d.tuning();
        Integer layers = Integer.getInteger("hicache.bench.gpu-replay.layers-per-launch");
        if (layers != null) {
            t = t.withLayersPerLoadLaunch(layers);
        }
        Integer backupBlocks = Integer.getInteger("hicache.bench.gpu-replay.backup-blocks-per-sm");
        if (backupBlocks != null) {
            t = t.withBackupShare(
                    backupBlocks,
                    Boolean.parseBoolean(System.getProperty("hicache.bench.gpu-replay.prioritize-loads", "true")));
        }
        System.err.println("gpu replay: CUDA tuning " + t);
        return d.withTuning(t);
    }

    /**
     * As {@link #contiguousGbps}, GPU 0's copies timed while GPU 1 (its own runtime, opened here) makes the same
     * copies at the same time from its own pinned buffer: both start each of the 15 rounds together.
     */
    private static double contiguousGbpsWithSecondGpu(CudaDeviceRuntime runtime, long bytes) throws Exception {
        long size = Math.max(bytes, 64L << 20);
        int rounds = 15;
        CyclicBarrier start = new CyclicBarrier(2);
        double[] gbps = new double[rounds];
        try (CudaDeviceRuntime second =
                        new CudaDeviceRuntime(CudaOptions.defaults().withOrdinal(1));
                ExecutorService pool = Executors.newFixedThreadPool(2)) {
            Future<?> other = pool.submit(() -> {
                copyRounds(second, size, rounds, start, null);
                return null;
            });
            Future<?> mine = pool.submit(() -> {
                copyRounds(runtime, size, rounds, start, gbps);
                return null;
            });
            mine.get(5, TimeUnit.MINUTES);
            other.get(5, TimeUnit.MINUTES);
        }
        Arrays.sort(gbps);
        return gbps[rounds / 2];
    }

    /**
     * {@code rounds} timed contiguous copies of {@code size} bytes to the device after a warm-up, each begun when
     * {@code start} (if any) lets every side go; their GB/s into {@code gbps}, if given.
     */
    private static void copyRounds(
            CudaDeviceRuntime runtime, long size, int rounds, @Nullable CyclicBarrier start, double @Nullable [] gbps)
            throws Exception {
        Path file = Files.createTempFile(Path.of("/dev/shm"), "hicache-gpu-replay-reference", ".bin");
        try (Arena arena = Arena.ofShared();
                ContiguousCopy copy = new ContiguousCopy(runtime, size);
                FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MemorySegment host = channel.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
            host.fill((byte) 1);
            try (HostRegistration pinned = runtime.registerHost(host)) {
                if (!pinned.pinned()) {
                    throw new IllegalStateException("the reference's host memory could not be pinned");
                }
                copy.copy(host, size, false); // warm-up
                for (int i = 0; i < rounds; i++) {
                    if (start != null) {
                        start.await(1, TimeUnit.MINUTES);
                    }
                    long begin = System.nanoTime();
                    copy.copy(host, size, false);
                    if (gbps != null) {
                        gbps[i] = size / (double) (System.nanoTime() - begin);
                    }
                }
            }
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /**
     * The load-backs' timer for a replay on the GPU: the replay waits for a load-back spinning, as an engine's
     * scheduler waits for KV on a request's critical path (and as the contiguous reference waits for its copy), unless
     * {@code -Dhicache.bench.gpu-replay.wait=park}; with {@code -Dhicache.bench.gpu-replay.trace-loads=true} each
     * load's phases are stamped ({@link LoadTracer}). TP 2's second rank (a child JVM) inherits the properties.
     */
    static ReplaySuite.LoadTimer loadTimer(DeviceRuntime runtime) {
        ReplaySuite.LoadTimer loads = new ReplaySuite.LoadTimer();
        String wait = System.getProperty("hicache.bench.gpu-replay.wait", "spin");
        loads.waitMode = switch (wait) {
            case "spin" -> WaitMode.SPIN;
            case "park" -> WaitMode.PARK;
            default ->
                throw new IllegalArgumentException(
                        "hicache.bench.gpu-replay.wait must be spin or park, was '" + wait + "'");
        };
        if (Boolean.getBoolean("hicache.bench.gpu-replay.trace-loads")) {
            loads.tracer = new LoadTracer(runtime);
        }
        return loads;
    }

    private static boolean secondGpu() {
        try (CudaDeviceRuntime second =
                new CudaDeviceRuntime(CudaOptions.defaults().withOrdinal(1))) {
            return second.info() != null;
        } catch (RuntimeException | LinkageError e) {
            return false;
        }
    }

    /**
     * TP 2: Llama-3.1-8B's KV heads split over two ranks (4 each, pages of 1 MiB), rank 0 on GPU 0 in this process and
     * rank 1 on GPU 1 in a child JVM, agreeing through a TCP rank group ({@link TpReplay}). Rows as at TP 1, from rank
     * 0, plus the turns on which the ranks answered differently (aim: none). With one GPU both ranks share it, and
     * the rows say so ({@code _tp2_one_gpu}): the agreement is the same, the bandwidth is not TP 2's.
     */
    private static List<BenchRow> tp2(CudaDeviceRuntime runtime, boolean twoGpus, int clients, int rounds, int turns)
            throws Exception {
        String tp = twoGpus ? "_tp2" : "_tp2_one_gpu";
        KvGeometry perRank = KvGeometry.mha(
                LLAMA_3_1_8B.layers(), LLAMA_3_1_8B.kvHeads() / 2, LLAMA_3_1_8B.headDim(), LLAMA_3_1_8B.dtype());
        TpReplay.Outcome o = TpReplay.runTwoRanks(runtime, twoGpus ? 1 : 0, perRank, clients, rounds);
        TpReplay.RankRun r = o.rank0();
        double contiguous = contiguousGbps(runtime, Math.min(r.loads().bytes, 1L << 30));
        System.err.printf(
                "gpu replay TP 2 (" + (twoGpus ? "GPUs 0 and 1" : "both ranks on GPU 0")
                        + "): rank 0 served %d tokens (device %d, host %d, store %d) vs device-only %d;"
                        + " loads %d bytes at %.2f GB/s (%.1f ms, %.1f ms of it after the copies were submitted) vs"
                        + " contiguous %.2f; %d of %d turns differ between the ranks; failed %d + %d%n",
                r.tiers().served(),
                r.tiers().device(),
                r.tiers().host(),
                r.tiers().storage(),
                r.deviceOnly().served(),
                r.loads().bytes,
                r.loads().gbps(),
                r.loads().nanos / 1e6,
                r.loads().copyNanos / 1e6,
                contiguous,
                o.disagreements(),
                o.turnsCompared(),
                r.tiers().failed(),
                r.deviceOnly().failed());
        System.err.println("gpu replay TP 2 rank 0's page store: " + r.tiers().l3());
        System.err.println("gpu replay TP 2 rank 0: " + r.loads().sizes());
        System.err.println("gpu replay TP 2 rank 0: " + r.loads().phases());
        System.err.println("gpu replay TP 2 rank 1: " + o.rank1Tally());
        List<BenchRow> rows = new ArrayList<>();
        BenchRow cached = BenchRow.higherIsBetter(
                "gpu_replay_cached_tokens" + tp,
                r.tiers().served(),
                "tokens",
                "device_only_caching",
                r.deviceOnly().served());
        BenchRow loadBack = BenchRow.higherIsBetter(
                "gpu_replay_loadback_gbps" + tp, r.loads().gbps(), "GB/s", "contiguous_pinned_copy", contiguous);
        // the aims are TP 2's; two ranks sharing one GPU's link to the host are not held to them
        rows.add(twoGpus ? cached.withAim(2.0) : cached);
        rows.add(twoGpus ? loadBack.withAim(0.8) : loadBack);
        if (twoGpus) {
            // At TP 2 both ranks load at once: what one GPU's contiguous copy reaches while the other copies too
            // says whether the two share a way to host memory (the reference above has the host to itself).
            double both = contiguousGbpsWithSecondGpu(runtime, Math.min(r.loads().bytes, 1L << 30));
            System.err.printf(
                    "gpu replay TP 2: contiguous copy on GPU 0 alone %.2f GB/s, while GPU 1 copies too %.2f GB/s;"
                            + " rank 0's load-backs against the latter %.3f%n",
                    contiguous, both, r.loads().gbps() / both);
            rows.add(BenchRow.higherIsBetter(
                    "gpu_replay_contiguous_gbps_both_gpus_copying",
                    both,
                    "GB/s",
                    "contiguous_pinned_copy_one_gpu",
                    contiguous));
        }
        rows.add(new BenchRow(
                "gpu_replay_rank_disagreements" + tp,
                o.disagreements(),
                "turns",
                "turns_compared",
                o.turnsCompared(),
                o.disagreements() / (double) o.turnsCompared(),
                "lower"));
        long failed = r.tiers().failed() + r.deviceOnly().failed();
        rows.add(new BenchRow(
                "gpu_replay_failed_requests" + tp,
                failed,
                "requests",
                "requests_run",
                2L * turns,
                failed / (2.0 * turns),
                "lower"));
        return rows;
    }

    /**
     * One contiguous copy of {@code bytes} to the device from pinned host memory of the host pool's kind (a /dev/shm
     * mapping registered with the runtime), median of 15, in GB/s.
     */
    private static double contiguousGbps(CudaDeviceRuntime runtime, long bytes) throws Exception {
        double[] gbps = new double[15];
        copyRounds(runtime, Math.max(bytes, 64L << 20), gbps.length, null, gbps);
        Arrays.sort(gbps);
        return gbps[gbps.length / 2];
    }
}
