package io.hicache.bench;

import io.hicache.core.config.Settings;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.rank.RankGroup;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.testkit.ChildJvm;
import io.hicache.transfer.rank.TcpRankGroup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The replay at tensor-parallel size 2 (issue 19, part 7): one process per device, rank 0 here and rank 1 in a child
 * JVM, whose caches agree through a {@link TcpRankGroup} on 127.0.0.1. Each rank replays the same turns twice, with
 * device-only caching and with all tiers (its host pool in /dev/shm, its own file store), and reports every turn's
 * device hits, tokens loaded back and failure; the ranks must answer the same on every turn. On CUDA the ranks use
 * devices 0 and 1 ({@code GpuRun --experiment replay} on a machine with two GPUs; both on device 0 where there is one); on the emulated device it is the
 * cross-process test of rank groups ({@code TpReplayTest}). Stateless.
 */
final class TpReplay {
    /** What the child prints last, after its turns. */
    static final String DONE = "tp-replay-done";

    private static final String GROUP = "tp-replay";

    private TpReplay() {}

    /** One rank's two replays: the tallies, each turn's answers, and the load-backs of the all-tier one. */
    record RankRun(
            ReplaySuite.Tally deviceOnly,
            ReplaySuite.Tally tiers,
            List<long[]> deviceOnlyTurns,
            List<long[]> tierTurns,
            ReplaySuite.LoadTimer loads) {}

    /** Both ranks' runs, and the turns on which rank 1 answered otherwise than rank 0 (both replays). */
    record Outcome(
            RankRun rank0,
            List<long[]> rank1DeviceOnly,
            List<long[]> rank1Tiers,
            int disagreements,
            int turnsCompared,
            String rank1Tally) {}

    /**
     * Rank 0 on {@code runtime} here, rank 1 in a child JVM (on CUDA device {@code rank1Gpu}, or, for -1, on an
     * emulated device), both replaying {@code clients} conversations of {@code rounds} turns for a model of
     * {@code geometry} per rank.
     */
    static Outcome runTwoRanks(DeviceRuntime runtime, int rank1Gpu, KvGeometry geometry, int clients, int rounds)
            throws Exception {
        try (TcpRankGroup group = TcpRankGroup.listen(GROUP, 2, "127.0.0.1", 0);
                TcpRankGroup queries = TcpRankGroup.listen(GROUP + "-prefetch", 2, "127.0.0.1", 0)) {
            ChildJvm child = ChildJvm.start(
                    TpReplay.class,
                    List.of(
                            Integer.toString(group.port()),
                            Integer.toString(queries.port()),
                            Integer.toString(rank1Gpu),
                            Integer.toString(geometry.layers()),
                            Integer.toString(geometry.kvHeads()),
                            Integer.toString(geometry.headDim()),
                            Integer.toString(clients),
                            Integer.toString(rounds)));
            RankRun mine;
            try {
                mine = runRank(runtime, geometry, group, queries, clients, rounds);
                if (!child.awaitLine(DONE, 10, TimeUnit.MINUTES)) {
                    throw new IllegalStateException("rank 1 did not finish its replays; it printed " + child.lines());
                }
            } finally {
                child.terminate(Duration.ofSeconds(30));
            }
            List<long[]> deviceOnly = new ArrayList<>();
            List<long[]> tiers = new ArrayList<>();
            String rank1Tally = "(none printed)";
            for (String line : child.lines()) {
                if (line.startsWith("tally ")) {
                    rank1Tally = line.substring(6);
                }
                String[] f = line.split(" ");
                if (f[0].equals("turn")) {
                    long[] turn = Arrays.stream(f, 2, f.length)
                            .mapToLong(Long::parseLong)
                            .toArray();
                    (f[1].equals("device-only") ? deviceOnly : tiers).add(turn);
                }
            }
            int compared = mine.deviceOnlyTurns().size() + mine.tierTurns().size();
            int differ = differences(mine.deviceOnlyTurns(), deviceOnly) + differences(mine.tierTurns(), tiers);
            return new Outcome(mine, deviceOnly, tiers, differ, compared, rank1Tally);
        }
    }

    private static int differences(List<long[]> a, List<long[]> b) {
        int differ = Math.abs(a.size() - b.size());
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
            if (!Arrays.equals(a.get(i), b.get(i))) {
                differ++;
            }
        }
        return differ;
    }

    /**
     * One rank's replays, agreeing with the others through {@code group}, and reducing the page store's hits over
     * {@code queries} on the prefetch query thread.
     */
    static RankRun runRank(
            DeviceRuntime runtime, KvGeometry geometry, RankGroup group, RankGroup queries, int clients, int rounds)
            throws Exception {
        List<int[]> workload = ReplaySuite.workload(clients, rounds);
        int devicePages = ReplaySuite.devicePages(clients, rounds);
        Path shm = Path.of("/dev/shm");
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-tp-replay-" + group.rank());
        Path storeDir = Files.createTempDirectory(
                Path.of(System.getProperty("java.io.tmpdir")), "hicache-tp-l3-" + group.rank());
        try {
            List<long[]> deviceOnlyTurns = new ArrayList<>();
            ReplaySuite.Tally deviceOnly = ReplaySuite.replayOn(
                    runtime,
                    geometry,
                    settings(hostDir, "device-only"),
                    workload,
                    devicePages,
                    null,
                    -1,
                    0,
                    null,
                    group,
                    queries,
                    deviceOnlyTurns);
            List<long[]> tierTurns = new ArrayList<>();
            // On a GPU as GpuReplay waits and traces; on the emulated device (tests, small machines) parked.
            ReplaySuite.LoadTimer loads =
                    runtime instanceof CudaDeviceRuntime ? GpuReplay.loadTimer(runtime) : new ReplaySuite.LoadTimer();
            ReplaySuite.Tally tiers = ReplaySuite.replayOn(
                    runtime,
                    geometry,
                    settings(hostDir, "all"),
                    workload,
                    devicePages,
                    FilePageStore.open(FileStoreConfig.at(storeDir).withCapacityBytes(48L << 30)),
                    -1,
                    0,
                    loads,
                    group,
                    queries,
                    tierTurns);
            return new RankRun(deviceOnly, tiers, deviceOnlyTurns, tierTurns, loads);
        } finally {
            FileSuite.deleteTree(hostDir);
            FileSuite.deleteTree(storeDir);
        }
    }

    private static Settings settings(Path hostDir, String tiers) {
        return ReplaySuite.settings(hostDir, tiers);
    }

    /**
     * Rank 1: {@code PORT PREFETCH_PORT GPU LAYERS KV_HEADS HEAD_DIM CLIENTS ROUNDS} (GPU: a CUDA device ordinal, or
     * -1 for an emulated device). Prints {@code turn device-only|all}
     * and each turn's answers, then {@value #DONE}.
     */
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int queryPort = Integer.parseInt(args[1]);
        int gpu = Integer.parseInt(args[2]);
        KvGeometry geometry = KvGeometry.mha(
                Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]), KvDtype.BFLOAT16);
        int clients = Integer.parseInt(args[6]);
        int rounds = Integer.parseInt(args[7]);
        try (TcpRankGroup group = TcpRankGroup.join(GROUP, 1, 2, "127.0.0.1", port, Duration.ofSeconds(30));
                TcpRankGroup queries =
                        TcpRankGroup.join(GROUP + "-prefetch", 1, 2, "127.0.0.1", queryPort, Duration.ofSeconds(30));
                DeviceRuntime runtime = gpu >= 0
                        ? new CudaDeviceRuntime(GpuReplay.cudaOptions().withOrdinal(gpu))
                        : new EmulatedDeviceRuntime(256L << 20, 2)) {
            RankRun run = runRank(runtime, geometry, group, queries, clients, rounds);
            StringBuilder out = new StringBuilder();
            for (long[] t : run.deviceOnlyTurns()) {
                out.append("turn device-only ").append(join(t)).append('\n');
            }
            for (long[] t : run.tierTurns()) {
                out.append("turn all ").append(join(t)).append('\n');
            }
            out.append("tally device ")
                    .append(run.tiers().device())
                    .append(" host ")
                    .append(run.tiers().host())
                    .append(" storage ")
                    .append(run.tiers().storage())
                    .append("; ")
                    .append(run.tiers().l3())
                    .append('\n');
            out.append(DONE).append(" served ").append(run.tiers().served()).append('\n');
            System.out.print(out);
            System.out.flush();
        }
    }

    private static String join(long[] values) {
        StringBuilder b = new StringBuilder();
        for (long v : values) {
            b.append(b.isEmpty() ? "" : " ").append(v);
        }
        return b.toString();
    }
}
