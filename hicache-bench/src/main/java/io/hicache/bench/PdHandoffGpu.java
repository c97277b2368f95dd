package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.testkit.PagePattern;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferBatch;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.staged.LayerArrival;
import io.hicache.transfer.staged.StagedReceive;
import io.hicache.transfer.staged.StagedSend;
import io.hicache.transfer.staged.StagingArea;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;

/**
 * Staged prefill-to-decode handoffs between two KV pools of one device runtime (on the GPU machine: two CUDA pools,
 * the prefill's and the decode's, on one GPU), through two transfer engines in this process over {@code shm} and
 * {@code tcp}: device, pinned staging, wire, pinned staging, device, layer by layer; first with the staged path's
 * own parts, then through the PD ranks ({@link RankHandoffs}: bootstrap, destination, status, aux). Each handoff is timed against the
 * slowest of its three stages measured alone on the same bytes in the same run (the gather, the wire, the scatter):
 * only overlapping them brings the handoff near that stage. Every byte of the last handoff of each size is checked at
 * the decode, after both staging areas and the decode's pages were overwritten with a sentinel.
 *
 * <p>Not thread-safe; one run at a time.
 */
final class PdHandoffGpu {
    /** Llama-3.1-8B at TP 1: 32 layers, 8 KV heads of 128, bf16 (128 KiB of KV per token). */
    static final KvGeometry LLAMA_3_1_8B = KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16);

    static final int PAGE_TOKENS = 16;
    private static final long SEED = 0x5EED_0000L;

    /** A handoff size: the rows are named after {@code label}. */
    record Size(String label, int tokens) {}

    /** What one size measured with one transport: medians in milliseconds. */
    record Timing(
            double gatherMs,
            double wireMs,
            double scatterMs,
            double handoffMs,
            double firstLayerMs,
            long mismatchedPages,
            int pages) {
        double slowestStageMs() {
            return Math.max(gatherMs, Math.max(wireMs, scatterMs));
        }
    }

    private PdHandoffGpu() {}

    /** The GPU run's sizes: 4K and 32K tokens of Llama-3.1-8B, three handoffs each (one with {@code quick}). */
    static List<BenchRow> run(DeviceRuntime runtime, boolean quick, PrintStream log, List<Timing> shmTimings)
            throws Exception {
        return run(
                runtime,
                LLAMA_3_1_8B,
                List.of(new Size("4k", 4096), new Size("32k", 32768)),
                quick ? 1 : 3,
                log,
                shmTimings);
    }

    /** As above for any sizes; {@code shmTimings} gets the {@code shm} timings, one per size, in order. */
    static List<BenchRow> run(
            DeviceRuntime runtime,
            KvGeometry geometry,
            List<Size> sizes,
            int repeats,
            PrintStream log,
            List<Timing> shmTimings)
            throws Exception {
        PageFormat format = new PageFormat(geometry, PAGE_TOKENS, HostLayout.PAGE_FIRST);
        int maxPages = sizes.stream().mapToInt(s -> pages(s)).max().orElseThrow();
        List<BenchRow> rows = new ArrayList<>();
        try (KvPool prefill = runtime.createPool(format, maxPages + 8);
                KvPool decode = runtime.createPool(format, maxPages + 8)) {
            fillPattern(prefill, maxPages);
            for (String transport : List.of("shm", "tcp")) {
                String suffix = transport.equals("shm") ? "" : "_tcp";
                List<Timing> timings = new ArrayList<>();
                try (TransferEngine prefillEngine = engine("pd-prefill", transport);
                        TransferEngine decodeEngine = engine("pd-decode", transport);
                        StagingArea prefillStaging =
                                StagingArea.open(prefillEngine, "staging", runtime, format, maxPages);
                        StagingArea decodeStaging =
                                StagingArea.open(decodeEngine, "staging", runtime, format, maxPages);
                        RemoteSegment peer =
                                prefillEngine.openSegment(decodeEngine.address(), Duration.ofSeconds(10))) {
                    if (!Checks.checkNotNull(peer.transport(), "a linked peer's transport")
                            .equals(transport)) {
                        throw new IllegalStateException("asked for " + transport + ", linked over " + peer.transport());
                    }
                    AtomicReference<Handoff> current = new AtomicReference<>();
                    decodeEngine.onMessage((from, payload) -> LayerArrival.decode(payload)
                            .ifPresent(a -> {
                                Handoff h = current.get();
                                if (h != null && h.id == a.handoff()) {
                                    h.receive.layerArrived(a.layer());
                                }
                            }));
                    Pair pair = new Pair(prefill, decode, prefillEngine, prefillStaging, decodeStaging, peer, current);
                    for (Size size : sizes) {
                        Timing t = pair.measure(pages(size), repeats);
                        log.printf(
                                Locale.ROOT,
                                "pd %s %s (%d pages, %.0f MiB): gather %.1f ms, wire %.1f ms, scatter %.1f"
                                        + " ms (sum %.1f), handoff %.1f ms, first layer %.2f ms, pages with wrong bytes %d%n",
                                transport,
                                size.label(),
                                t.pages(),
                                bytes(format, t.pages()) / 1048576.0,
                                t.gatherMs(),
                                t.wireMs(),
                                t.scatterMs(),
                                t.gatherMs() + t.wireMs() + t.scatterMs(),
                                t.handoffMs(),
                                t.firstLayerMs(),
                                t.mismatchedPages());
                        rows.addAll(rows(format, size, suffix, t));
                        timings.add(t);
                        if (transport.equals("shm")) {
                            shmTimings.add(t);
                        }
                        if (Boolean.getBoolean("hicache.bench.pd.sweep")) {
                            // Diagnostic, not rows: how the bound on bytes on the wire moves the handoff.
                            log.println("pd " + transport + " " + size.label() + " by wire bound:"
                                    + pair.sweep(pages(size), new long[] {
                                        16L << 20, 32L << 20, 64L << 20, 128L << 20, 256L << 20, 1L << 40
                                    }));
                        }
                    }
                }
                rows.addAll(RankHandoffs.measure(
                        runtime, prefill, decode, format, transport, sizes, timings, repeats, log));
            }
        }
        return rows;
    }

    private static List<BenchRow> rows(PageFormat format, Size size, String suffix, Timing t) {
        String s = size.label() + suffix;
        double gb = bytes(format, t.pages()) / 1e9;
        List<BenchRow> rows = new ArrayList<>();
        rows.add(BenchRow.lowerIsBetter(
                        "pd_handoff_" + size.label() + "_ms" + suffix,
                        t.handoffMs(),
                        "ms",
                        "slowest_single_stage_alone",
                        t.slowestStageMs())
                .withAim(1.3));
        rows.add(BenchRow.lowerIsBetter(
                "pd_first_layer_" + s + "_ms", t.firstLayerMs(), "ms", "pd_handoff_" + s, t.handoffMs()));
        rows.add(BenchRow.higherIsBetter(
                "pd_stage_gather_" + s + "_gbps",
                gb / (t.gatherMs() / 1e3),
                "GB/s",
                "pd_handoff_" + s,
                gb / (t.handoffMs() / 1e3)));
        rows.add(BenchRow.higherIsBetter(
                "pd_stage_wire_" + s + "_gbps",
                gb / (t.wireMs() / 1e3),
                "GB/s",
                "pd_handoff_" + s,
                gb / (t.handoffMs() / 1e3)));
        rows.add(BenchRow.higherIsBetter(
                "pd_stage_scatter_" + s + "_gbps",
                gb / (t.scatterMs() / 1e3),
                "GB/s",
                "pd_handoff_" + s,
                gb / (t.handoffMs() / 1e3)));
        rows.add(BenchRow.wrongPages("pd_pages_with_wrong_bytes_" + s, t.mismatchedPages(), t.pages()));
        return rows;
    }

    static int pages(Size size) {
        return (size.tokens() + PAGE_TOKENS - 1) / PAGE_TOKENS;
    }

    static long bytes(PageFormat format, int pages) {
        return format.pageBytes() * pages;
    }

    static TransferEngine engine(String name, String transport) {
        return TransferEngine.open(TransferConfig.defaults(name)
                .withTransports(List.of(transport))
                .withIoThreads(4)
                .withSliceBytes(1 << 20)
                .withWindowBytesPerConnection(16L << 20)
                .withTimeouts(30_000, 2_000, 1_000));
    }

    /** Prefill page p holds the pattern of seed {@code SEED + p}. */
    static void fillPattern(KvPool pool, int pages) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment flat = arena.allocate(pool.format().pageBytes(), 64);
            for (int p = 0; p < pages; p++) {
                PagePattern.fill(flat, SEED + p);
                pool.writePage(p, flat);
            }
        }
    }

    /** One handoff in flight: the decode's listener hands it the sender's layer reports. */
    private record Handoff(long id, StagedReceive receive) {}

    /** Both sides of one transport. */
    private record Pair(
            KvPool prefill,
            KvPool decode,
            TransferEngine prefillEngine,
            StagingArea prefillStaging,
            StagingArea decodeStaging,
            RemoteSegment peer,
            AtomicReference<Handoff> current) {
        private static long nextId = 1;

        Timing measure(int pages, int repeats) throws Exception {
            int[] source = IntStream.range(0, pages).toArray();
            // The decode's pages and slots are not the prefill's: shifted, so a copy to the wrong place shows.
            int[] target = IntStream.range(0, pages).map(p -> p + 3).toArray();
            int[] slots = IntStream.range(0, pages).toArray();
            int layers = prefill.format().geometry().layers();
            double[] gather = new double[repeats];
            double[] wire = new double[repeats];
            double[] scatter = new double[repeats];
            double[] handoff = new double[repeats];
            double[] first = new double[repeats];
            long wrong = 0;
            for (int r = 0; r < repeats; r++) {
                long t0 = System.nanoTime();
                await(prefill.backupLayers(source, prefillStaging.slab(), slots, 0, layers));
                gather[r] = millisSince(t0);
                List<TransferRequest> writes = new ArrayList<>();
                for (int layer = 0; layer < layers; layer++) {
                    writes.addAll(StagedSend.writesFor(
                            layer,
                            prefillStaging,
                            slots,
                            decodeStaging.region().name(),
                            decodeStaging.slab().slots(),
                            slots));
                }
                t0 = System.nanoTime();
                TransferBatch batch = prefillEngine.submit(peer, writes, Deadline.after(Duration.ofMinutes(2)));
                if (!batch.await(Duration.ofMinutes(2)) || !batch.allDone()) {
                    throw new IllegalStateException("the wire alone failed: " + batch.firstFailure());
                }
                wire[r] = millisSince(t0);
                t0 = System.nanoTime();
                await(decode.loadLayers(decodeStaging.slab(), slots, target, 0, layers));
                scatter[r] = millisSince(t0);
                boolean check = r == repeats - 1;
                if (check) {
                    // Whatever the stages alone left must not pass for the handoff's work.
                    prefillStaging.region().memory().fill(PagePattern.SENTINEL);
                    decodeStaging.region().memory().fill(PagePattern.SENTINEL);
                    fillSentinel(decode, target);
                }
                double[] times = handoff(source, target, slots, StagedSend.WIRE_AHEAD_BYTES);
                first[r] = times[0];
                handoff[r] = times[1];
                if (check) {
                    wrong = mismatchedPages(decode, source, target);
                }
            }
            return new Timing(
                    median(gather), median(wire), median(scatter), median(handoff), median(first), wrong, pages);
        }

        /** One staged handoff with at most {@code wireAheadBytes} on the wire: {first layer usable, done} in ms. */
        double[] handoff(int[] source, int[] target, int[] slots, long wireAheadBytes) throws Exception {
            StagedReceive receive = new StagedReceive(decode, decodeStaging, slots, target);
            long id = nextId++;
            current.set(new Handoff(id, receive));
            long t0 = System.nanoTime();
            StagedSend send = StagedSend.start(
                    prefill,
                    source,
                    prefillStaging,
                    slots,
                    prefillEngine,
                    peer,
                    decodeStaging.region().name(),
                    decodeStaging.slab().slots(),
                    slots,
                    Deadline.after(Duration.ofMinutes(2)),
                    layer -> peer.send(new LayerArrival(id, layer).encode()),
                    wireAheadBytes);
            KvCopy usable = receive.layers();
            usable.layerDone(0).get(2, TimeUnit.MINUTES);
            double first = millisSince(t0);
            usable.done().get(2, TimeUnit.MINUTES);
            double all = millisSince(t0);
            send.done().get(2, TimeUnit.MINUTES);
            current.set(null);
            return new double[] {first, all};
        }

        /** Handoffs of {@code pages} pages with each bound on the wire, five each: medians, for the log. */
        String sweep(int pages, long[] bounds) throws Exception {
            int[] source = IntStream.range(0, pages).toArray();
            int[] target = IntStream.range(0, pages).map(p -> p + 3).toArray();
            int[] slots = IntStream.range(0, pages).toArray();
            StringBuilder out = new StringBuilder();
            for (long bound : bounds) {
                double[] first = new double[5];
                double[] all = new double[5];
                for (int r = 0; r < 5; r++) {
                    double[] t = handoff(source, target, slots, bound);
                    first[r] = t[0];
                    all[r] = t[1];
                }
                out.append(String.format(
                        Locale.ROOT,
                        " %d MiB: %.1f ms (first layer %.2f ms, all %s);",
                        bound >> 20,
                        median(all),
                        median(first),
                        Arrays.toString(Arrays.stream(all)
                                .map(v -> Math.round(v * 10) / 10.0)
                                .toArray())));
            }
            return out.toString();
        }

        private static void await(KvCopy copy) throws InterruptedException {
            if (!copy.await(Deadline.after(Duration.ofMinutes(2)))) {
                throw new IllegalStateException("a copy took over 2 minutes");
            }
        }
    }

    static void fillSentinel(KvPool pool, int[] pages) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment flat = arena.allocate(pool.format().pageBytes(), 64);
            PagePattern.fillSentinel(flat);
            for (int p : pages) {
                pool.writePage(p, flat);
            }
        }
    }

    static long mismatchedPages(KvPool decode, int[] source, int[] target) {
        long wrong = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment flat = arena.allocate(decode.format().pageBytes(), 64);
            for (int i = 0; i < target.length; i++) {
                decode.readPage(target[i], flat);
                if (PagePattern.firstMismatch(flat, SEED + source[i]) >= 0) {
                    wrong++;
                }
            }
        }
        return wrong;
    }

    static double millisSince(long t0) {
        return (System.nanoTime() - t0) / 1e6;
    }

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
