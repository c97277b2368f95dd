package io.hicache.bench;

import io.hicache.core.memory.DeviceInfo;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntimeProvider;
import io.hicache.cuda.CudaOptions;
import io.hicache.cuda.kit.CudaKits;
import io.hicache.testkit.ConformanceReport;
import io.hicache.testkit.ConformanceRunner;
import io.hicache.transfer.cuda.kit.CudaIpcTransportKit;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Callable;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The one GPU entry point: on the GPU machine it runs the device runtime kit against the CUDA runtime (kernel path,
 * copy-engine path, copy engine across small registration slices, kernel shaped unlike the default), then the
 * {@code cuda} bench suite, writes everything under the folder given with {@code --out} ({@code conformance.txt},
 * {@code cuda.json}, {@code gpu-run.log}) and prints a short table last. {@code --experiment tuning} replaces the
 * suite with {@link CudaTuningExperiment} ({@code cuda-tuning.json}), {@code --experiment latency} with
 * {@link CudaLatencyExperiment} ({@code cuda-latency.json}), {@code --experiment hugepages} with
 * {@link CudaHugePageExperiment} ({@code cuda-hugepages.json}), {@code --experiment order} with
 * {@link CudaOrderExperiment} ({@code cuda-order.json}), {@code --experiment replay} with {@link GpuReplay}
 * ({@code gpu-replay.json}), {@code --experiment pd} with {@link PdHandoffGpu}, {@link NvlinkHandoffGpu}
 * and {@link RankIpcHandoffs} ({@code pd-gpu.json}; its kit is the cuda-ipc transport's, not the runtime kits),
 * {@code --experiment ttft} with {@link GpuTtft} ({@code ttft.json}, with {@code --python-results}: the JSON of
 * {@code clients/python/interop/gpu_ttft.py} run just before). {@code --slab-dir DIR} puts the suite's pinned
 * slab in DIR instead of /dev/shm (a tmpfs or hugetlbfs folder); given several times, the huge page experiment
 * compares each against /dev/shm. {@code --no-kits} skips the kits (for experiments only: a suite run always runs
 * them). Exit status 0 when every kit passes and the suite runs, 1 otherwise, 2 without a usable GPU.
 *
 * <pre>
 * scripts/pack-gpu.sh
 * bash .gpu/java -cp '.gpu/lib/*' io.hicache.bench.GpuRun --out $OUT [--quick] [--slab-dir DIR]...
 *     [--experiment tuning|latency|hugepages|order|replay|pd|ttft [--no-kits]] [--python-results FILE]
 * </pre>
 */
@Command(
        name = "GpuRun",
        mixinStandardHelpOptions = true,
        description = "Runs the CUDA kits and the cuda bench suite "
                + "(or one experiment) on this machine's GPU, writing the log and results under --out.")
public final class GpuRun implements Callable<Integer> {
    @Option(names = "--out", required = true, paramLabel = "DIR", description = "where the log and results go")
    Path out;

    @Option(names = "--quick", description = "short rounds: checks the run works")
    boolean quick;

    @Option(
            names = "--experiment",
            paramLabel = "NAME",
            description = "run one experiment: tuning, latency, hugepages, " + "order, replay, pd or ttft")
    @Nullable
    Experiment experiment;

    @Option(names = "--no-kits", description = "skip the kits (experiments only)")
    boolean noKits;

    @Option(
            names = "--slab-dir",
            paramLabel = "DIR",
            description = "a host slab folder instead of /dev/shm; repeatable")
    List<Path> slabDirs = new ArrayList<>();

    @Option(
            names = "--python-results",
            paramLabel = "FILE",
            description = "the ttft experiment: the JSON that clients/python/interop/gpu_ttft.py wrote in this run")
    @Nullable
    Path pythonResults;

    /** The experiments, by their command-line names. */
    enum Experiment {
        TUNING,
        LATENCY,
        HUGEPAGES,
        ORDER,
        REPLAY,
        PD,
        TTFT
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new GpuRun())
                .setCaseInsensitiveEnumValuesAllowed(true)
                .execute(args));
    }

    @Override
    public Integer call() throws Exception {
        if (experiment == null && noKits) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--no-kits goes with --experiment only");
        }
        Files.createDirectories(out);
        try (OutputStream file = Files.newOutputStream(out.resolve("gpu-run.log"));
                PrintStream log = new PrintStream(new Tee(System.out, file), true, StandardCharsets.UTF_8)) {
            return run(
                    out,
                    quick,
                    experiment == null ? null : experiment.name().toLowerCase(Locale.ROOT),
                    !noKits,
                    slabDirs,
                    pythonResults,
                    log);
        }
    }

    /** {@code " -Dname=value"} when the property is set (the result files' command repeats it), else "". */
    private static String property(String name) {
        String value = System.getProperty(name);
        return value == null ? "" : " -D" + name + "=" + value;
    }

    private static int run(
            Path out,
            boolean quick,
            @Nullable String experiment,
            boolean runKits,
            List<Path> slabDirs,
            @Nullable Path pythonResults,
            PrintStream log)
            throws IOException {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        if (why.isPresent()) {
            log.println("no usable GPU: " + why.get());
            return 2;
        }
        DeviceInfo info;
        boolean kernel;
        try (CudaDeviceRuntime runtime = new CudaDeviceRuntime(CudaOptions.defaults())) {
            info = runtime.info();
            kernel = runtime.usesKernel();
        }
        log.printf(
                Locale.ROOT,
                "device: %s, %.1f GiB (%.1f free), copy kernel %s%n",
                info.name(),
                info.totalBytes() / 1073741824.0,
                info.freeBytes() / 1073741824.0,
                kernel ? "loaded" : "NOT loaded");

        // the pd experiment is about moving KV between processes: its kit is the cuda-ipc transport's
        List<ConformanceReport> allKits = !runKits
                ? List.of()
                : "pd".equals(experiment)
                        ? List.of(ConformanceRunner.run(CudaIpcTransportKit.class, "cuda-ipc transport"))
                        : CudaKits.run();
        ByteArrayOutputStream kits = new ByteArrayOutputStream();
        try (PrintStream p = new PrintStream(kits, true, StandardCharsets.UTF_8)) {
            for (ConformanceReport r : allKits) {
                r.print(p);
                p.println();
            }
        }
        if (runKits) {
            Files.write(out.resolve("conformance.txt"), kits.toByteArray());
            log.print(kits.toString(StandardCharsets.UTF_8));
        }

        BenchReport report = null;
        try {
            StringBuilder command = new StringBuilder("bash .gpu/java"
                    + (Boolean.getBoolean("hicache.bench.pd.gpuToGpuOnly")
                            ? " -Dhicache.bench.pd.gpuToGpuOnly=true"
                            : "")
                    + (Boolean.getBoolean("hicache.bench.pd.stagedOnly") ? " -Dhicache.bench.pd.stagedOnly=true" : "")
                    + property("hicache.bench.device-free-target")
                    + property("hicache.bench.gpu-replay.layers-per-launch")
                    + property("hicache.bench.gpu-replay.backup-blocks-per-sm")
                    + property("hicache.bench.gpu-replay.prioritize-loads")
                    + property("hicache.pd.trace")
                    + property("hicache.cuda-ipc.trace")
                    + property("hicache.cuda-ipc.blocking-wait")
                    + property("hicache.bench.pd.worker-spin-micros")
                    + " -cp '.gpu/lib/*' io.hicache.bench.GpuRun --out $OUT");
            command.append(quick ? " --quick" : "");
            slabDirs.forEach(d -> command.append(" --slab-dir ").append(d));
            command.append(experiment != null ? " --experiment " + experiment : "")
                    .append(runKits ? "" : " --no-kits");
            if (experiment == null) {
                Path slabDir = slabDirs.isEmpty() ? CudaSuite.DEFAULT_SLAB_DIR : slabDirs.get(0);
                report = BenchReport.of("cuda", new CudaSuite(slabDir).run(quick), command.toString(), 0);
            } else if (experiment.equals("tuning")) {
                report = BenchReport.of("cuda-tuning", CudaTuningExperiment.run(quick), command.toString(), 0);
            } else if (experiment.equals("order")) {
                report = BenchReport.of("cuda-order", CudaOrderExperiment.run(quick), command.toString(), 0);
            } else if (experiment.equals("replay")) {
                report = BenchReport.of("gpu-replay", GpuReplay.run(quick), command.toString(), 0);
            } else if (experiment.equals("pd")) {
                // -Dhicache.bench.pd.gpuToGpuOnly=true: only the cuda-ipc rows (pd-gpu-nvlink.json), for a short lease
                // of the two-GPU machine
                boolean gpuToGpuOnly = Boolean.getBoolean("hicache.bench.pd.gpuToGpuOnly");
                List<BenchRow> rows = new ArrayList<>();
                List<PdHandoffGpu.Timing> shmStages = new ArrayList<>();
                if (!gpuToGpuOnly) {
                    try (CudaDeviceRuntime runtime = new CudaDeviceRuntime(CudaOptions.defaults())) {
                        rows.addAll(PdHandoffGpu.run(runtime, quick, log, shmStages));
                    }
                    // the staged path with prefill and decode in two processes, on two GPUs where there are two
                    rows.addAll(RankIpcHandoffs.staged(quick, log, shmStages));
                }
                // -Dhicache.bench.pd.stagedOnly=true: the staged rows alone (one process, then across processes)
                if (!Boolean.getBoolean("hicache.bench.pd.stagedOnly")) {
                    rows.addAll(NvlinkHandoffGpu.run(quick, log));
                    rows.addAll(RankIpcHandoffs.run(quick, log));
                }
                // the partial runs get their own suite names, so that they do not stand in for a full run's file
                String suite = gpuToGpuOnly
                        ? "pd-gpu-nvlink"
                        : Boolean.getBoolean("hicache.bench.pd.stagedOnly") ? "pd-gpu-staged" : "pd-gpu";
                report = BenchReport.of(suite, rows, command.toString(), 0);
            } else if (experiment.equals("ttft")) {
                if (pythonResults == null) {
                    throw new IllegalArgumentException(
                            "the ttft experiment needs --python-results (gpu_ttft.py's JSON)");
                }
                command.append(" --python-results ").append(pythonResults);
                report = BenchReport.of("ttft", GpuTtft.run(quick, pythonResults, log), command.toString(), 0);
            } else if (experiment.equals("latency")) {
                report = BenchReport.of("cuda-latency", CudaLatencyExperiment.run(quick), command.toString(), 0);
            } else {
                report = BenchReport.of(
                        "cuda-hugepages", CudaHugePageExperiment.run(quick, slabDirs), command.toString(), 0);
            }
            report.write(out);
            report.print(log);
        } catch (Exception e) {
            log.println(
                    (experiment != null ? "the " + experiment + " experiment" : "the cuda suite") + " failed: " + e);
            e.printStackTrace(log);
        }

        log.println();
        log.println("summary (" + info.name() + ")");
        for (ConformanceReport r : allKits) {
            log.printf(
                    Locale.ROOT,
                    "  kit, %s: %d passed, %d failed, %d skipped%n",
                    r.target(),
                    r.count(ConformanceReport.Outcome.PASSED),
                    r.count(ConformanceReport.Outcome.FAILED),
                    r.count(ConformanceReport.Outcome.SKIPPED));
            r.cases(ConformanceReport.Outcome.FAILED)
                    .forEach(c -> log.println("  FAILED " + c.name() + ": " + c.detail()));
        }
        if (report != null) {
            for (BenchRow row : report.rows()) {
                if (!row.metric().contains("page_first_") || row.metric().contains("page_first_direct")) {
                    log.printf(
                            Locale.ROOT,
                            "  %-52s %10.2f %-5s ratio %.3f%n",
                            row.metric(),
                            row.value(),
                            row.unit(),
                            row.ratio());
                }
            }
        }
        boolean ok = allKits.stream().allMatch(ConformanceReport::passed) && report != null;
        log.println(ok ? "result: OK" : "result: FAILED");
        return ok ? 0 : 1;
    }

    /** Writes to two streams. */
    private static final class Tee extends OutputStream {
        private final OutputStream a;
        private final OutputStream b;

        Tee(OutputStream a, OutputStream b) {
            this.a = a;
            this.b = b;
        }

        @Override
        public void write(int c) throws IOException {
            a.write(c);
            b.write(c);
        }

        @Override
        public void write(byte[] buf, int off, int len) throws IOException {
            a.write(buf, off, len);
            b.write(buf, off, len);
        }

        @Override
        public void flush() throws IOException {
            a.flush();
            b.flush();
        }
    }
}
