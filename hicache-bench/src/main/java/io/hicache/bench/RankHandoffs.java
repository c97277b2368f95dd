package io.hicache.bench;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.PageFormat;
import io.hicache.testkit.PagePattern;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.pd.BootstrapServer;
import io.hicache.transfer.pd.DecodeRank;
import io.hicache.transfer.pd.KvPoll;
import io.hicache.transfer.pd.KvReceiver;
import io.hicache.transfer.pd.KvSender;
import io.hicache.transfer.pd.PdConfig;
import io.hicache.transfer.pd.PrefillRank;
import io.hicache.transfer.pd.RankSpec;
import io.hicache.transfer.staged.StagingArea;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.IntStream;

/**
 * The handoffs of {@link PdHandoffGpu} again, through a staged {@link PrefillRank} and {@link DecodeRank} (bootstrap
 * server, destination with staging slots, LAYER messages, status, aux), timed from the prefill's send of the whole
 * request as one chunk to the decode's SUCCESS (every layer scattered), against the same slowest stage alone that the
 * staged path's own run measured; the last handoff of each size is checked byte for byte after sentinels. Not
 * thread-safe.
 */
final class RankHandoffs {
    private RankHandoffs() {}

    static List<BenchRow> measure(
            DeviceRuntime runtime,
            KvPool prefill,
            KvPool decode,
            PageFormat format,
            String transport,
            List<PdHandoffGpu.Size> sizes,
            List<PdHandoffGpu.Timing> stages,
            int repeats,
            PrintStream log)
            throws Exception {
        String suffix = transport.equals("shm") ? "" : "_tcp";
        int maxPages = sizes.stream().mapToInt(PdHandoffGpu::pages).max().orElseThrow();
        PdConfig config =
                new PdConfig(60_000, 120_000, 120_000, 5_000, 2, 30_000, 10_000, PdConfig.DEFAULT_WORKER_SPIN_MICROS);
        List<BenchRow> rows = new ArrayList<>();
        try (BootstrapServer boot = BootstrapServer.start("127.0.0.1", 0, 1);
                TransferEngine prefillEngine = PdHandoffGpu.engine("pd-rank-prefill", transport);
                TransferEngine decodeEngine = PdHandoffGpu.engine("pd-rank-decode", transport);
                StagingArea prefillStaging =
                        StagingArea.open(prefillEngine, RankSpec.STAGING_REGION, runtime, format, maxPages);
                StagingArea decodeStaging =
                        StagingArea.open(decodeEngine, RankSpec.STAGING_REGION, runtime, format, maxPages)) {
            RankSpec prefillSpec = spec(format, prefill, prefillEngine, maxPages);
            RankSpec decodeSpec = spec(format, decode, decodeEngine, maxPages);
            LocalRegion prefillAux = prefillEngine.registerShared(RankSpec.AUX_REGION, prefillSpec.auxBytes());
            LocalRegion decodeAux = decodeEngine.registerShared(RankSpec.AUX_REGION, decodeSpec.auxBytes());
            try (PrefillRank prefillRank = PrefillRank.startStaged(
                            prefillEngine, prefillSpec, prefill, prefillStaging, prefillAux, boot.url(), config);
                    DecodeRank decodeRank = DecodeRank.startStaged(
                            decodeEngine, decodeSpec, decode, decodeStaging, decodeAux, config)) {
                long room = 1;
                for (int s = 0; s < sizes.size(); s++) {
                    PdHandoffGpu.Size size = sizes.get(s);
                    int pages = PdHandoffGpu.pages(size);
                    int[] source = IntStream.range(0, pages).toArray();
                    int[] target = IntStream.range(0, pages).map(p -> p + 5).toArray();
                    double[] handoff = new double[repeats];
                    long wrong = 0;
                    for (int r = 0; r < repeats; r++) {
                        boolean check = r == repeats - 1;
                        if (check) {
                            prefillStaging.region().memory().fill(PagePattern.SENTINEL);
                            decodeStaging.region().memory().fill(PagePattern.SENTINEL);
                            PdHandoffGpu.fillSentinel(decode, target);
                        }
                        KvReceiver receiver = decodeRank.receiver(room, boot.url());
                        receiver.init(target, 0, 0);
                        KvSender sender = prefillRank.sender(room);
                        await(
                                () -> sender.poll() == KvPoll.WAITING_FOR_INPUT || sender.poll() == KvPoll.FAILED,
                                "the prefill of room " + room + " waiting for input");
                        long t0 = System.nanoTime();
                        sender.send(source, true, ("room " + room).getBytes());
                        while (!receiver.poll().isFinal()) {
                            Thread.onSpinWait();
                            if (System.nanoTime() - t0 > TimeUnit.MINUTES.toNanos(2)) {
                                throw new IllegalStateException("room " + room + " did not finish in 2 minutes");
                            }
                        }
                        handoff[r] = PdHandoffGpu.millisSince(t0);
                        if (receiver.poll() != KvPoll.SUCCESS) {
                            throw new IllegalStateException("room " + room + ": " + receiver.failureReason());
                        }
                        await(() -> sender.poll().isFinal(), "the prefill of room " + room + " final");
                        sender.close();
                        receiver.close();
                        if (check) {
                            wrong = PdHandoffGpu.mismatchedPages(decode, source, target);
                        }
                        room++;
                    }
                    double median = PdHandoffGpu.median(handoff);
                    double slowest = stages.get(s).slowestStageMs();
                    log.printf(
                            Locale.ROOT,
                            "pd ranks %s %s: handoff %.1f ms (slowest stage alone %.1f ms, the staged"
                                    + " path's own handoff %.1f ms), pages with wrong bytes %d%n",
                            transport,
                            size.label(),
                            median,
                            slowest,
                            stages.get(s).handoffMs(),
                            wrong);
                    addStagedRows(rows, size.label(), suffix, median, slowest, wrong, pages);
                }
            }
        }
        return rows;
    }

    private static RankSpec spec(PageFormat format, KvPool pool, TransferEngine engine, int stagingSlots) {
        return new RankSpec(format.geometry(), format.pageSizeTokens(), 1, 0, pool.pages(), 4, 64, engine.address())
                .withStaging(stagingSlots);
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(1);
        }
    }

    /**
     * The rows of a staged handoff through the ranks: its median against the slowest stage alone (aim 1.3), and its
     * pages with wrong bytes; {@code suffix} says where it ran ({@code _two_gpus}), after the size's label.
     */
    static void addStagedRows(
            List<BenchRow> rows, String size, String suffix, double medianMs, double slowestMs, long wrong, int pages) {
        rows.add(BenchRow.lowerIsBetter(
                        "pd_rank_handoff_" + size + "_ms" + suffix,
                        medianMs,
                        "ms",
                        "slowest_single_stage_alone",
                        slowestMs)
                .withAim(1.3));
        rows.add(BenchRow.wrongPages("pd_rank_pages_with_wrong_bytes_" + size + suffix, wrong, pages));
    }
}
