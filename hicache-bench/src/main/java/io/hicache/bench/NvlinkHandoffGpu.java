package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.testkit.ChildJvm;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.RequestState;
import io.hicache.transfer.TransferBatch;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.cuda.kit.DeviceBuffer;
import io.hicache.transfer.cuda.kit.IpcPeer;
import io.hicache.transfer.cuda.kit.IpcPeerMain;
import io.hicache.transfer.kit.TransferPatterns;
import io.hicache.transfer.spi.MemoryKind;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.Callable;

/**
 * Handoffs GPU to GPU over the {@code cuda-ipc} transport: the prefill (this process) writes a request's pages from
 * its KV pool, laid out as the CUDA pool lays out Llama-3.1-8B (layer first, 16-token pages), into the decode's pool
 * in a child process ({@link IpcPeerMain}) on device 1 where the machine has two GPUs, else on the same GPU. Two
 * plans per size: {@code contiguous} (fresh pools: the pages are consecutive on both sides, so one request per layer
 * and part, as {@code KvPlan} merges runs) and {@code fragmented} (the decode's pages shuffled: one 32 KiB request per
 * page, layer and part). The reference is one {@code cuMemcpyPeer} of the same number of bytes between the same two
 * devices in this run (aim: at least 0.8 of it). After the runs the decode's whole pool is compared, by CRC-32C over
 * its device memory, with the kit's model of what it must hold.
 *
 * <p>Not thread-safe; one run at a time.
 */
final class NvlinkHandoffGpu {
    private static final long PREFILL_SEED = 0x5EED_1000L;
    private static final long DECODE_SEED = 0x5EED_2000L;

    private NvlinkHandoffGpu() {}

    static List<BenchRow> run(boolean quick, PrintStream log) throws Exception {
        PageFormat format = new PageFormat(PdHandoffGpu.LLAMA_3_1_8B, PdHandoffGpu.PAGE_TOKENS, HostLayout.PAGE_FIRST);
        List<PdHandoffGpu.Size> sizes = List.of(new PdHandoffGpu.Size("4k", 4096), new PdHandoffGpu.Size("32k", 32768));
        int poolPages = PdHandoffGpu.pages(sizes.getLast());
        long poolBytes = PdHandoffGpu.bytes(format, poolPages);
        int repeats = quick ? 2 : 7;
        int peerDevice = IpcPeer.peerDevice();
        log.printf(
                Locale.ROOT,
                "nvlink: pools of %d pages (%.1f GiB) on devices 0 and %d%s%n",
                poolPages,
                poolBytes / 1073741824.0,
                peerDevice,
                peerDevice == 0 ? " (one GPU: both processes on it)" : "");
        Path shmDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-nvlink");
        ChildJvm decode = IpcPeer.start(shmDir, poolBytes, DECODE_SEED);
        List<BenchRow> rows = new ArrayList<>();
        try (DeviceBuffer prefillPool = DeviceBuffer.allocate(0, poolBytes);
                DeviceBuffer reference = DeviceBuffer.allocate(
                        peerDevice, PdHandoffGpu.bytes(format, PdHandoffGpu.pages(sizes.getLast())));
                TransferEngine prefill = TransferEngine.open(TransferConfig.defaults("nvlink-prefill")
                        .withShmDir(shmDir)
                        .withTransports(List.of("cuda-ipc", "shm"))
                        .withTimeouts(30_000, 2_000, 1_000));
                Arena arena = Arena.ofShared()) {
            IpcPeerMain.fill(prefillPool, PREFILL_SEED);
            LocalRegion kv = prefill.registerDevice("kv", prefillPool.address(), poolBytes);
            prefill.registerShared("aux", 4096);
            RemoteSegment segment = prefill.openSegment(IpcPeer.address(decode), Duration.ofSeconds(30));
            log.println("nvlink: device requests go over "
                    + segment.transportFor(MemoryKind.DEVICE, MemoryKind.DEVICE).orElse("NOTHING"));
            MemorySegment model = arena.allocate(poolBytes, 4096);
            TransferPatterns.fill(model, DECODE_SEED);
            Random random = new Random(42);
            for (PdHandoffGpu.Size size : sizes) {
                int pages = PdHandoffGpu.pages(size);
                long bytes = PdHandoffGpu.bytes(format, pages);
                double referenceMs = time(repeats, () -> {
                    prefillPool.copyTo(reference, 0, 0, bytes);
                    // a device-to-device cuMemcpyPeer returns before the copy ends: time it to the end
                    prefillPool.synchronize();
                    reference.synchronize();
                    return null;
                });
                double referenceGbps = bytes / 1e9 / (referenceMs / 1e3);
                int[] consecutive = new int[pages];
                Arrays.setAll(consecutive, i -> i);
                List<Integer> shuffled = new ArrayList<>();
                for (int p = 0; p < poolPages; p++) {
                    shuffled.add(p);
                }
                Collections.shuffle(shuffled, random);
                int[] scattered = shuffled.subList(0, pages).stream()
                        .mapToInt(Integer::intValue)
                        .toArray();
                for (String plan : List.of("contiguous", "fragmented")) {
                    int[] target = plan.equals("contiguous") ? consecutive : scattered;
                    List<TransferRequest> writes = plan(format, poolPages, kv.memory(), consecutive, target);
                    apply(format, poolPages, model, consecutive, target);
                    double ms = time(repeats, () -> {
                        handoff(prefill, segment, writes);
                        return null;
                    });
                    double gbps = bytes / 1e9 / (ms / 1e3);
                    log.printf(
                            Locale.ROOT,
                            "nvlink %s %s: %d requests, %.1f MiB, %.3f ms = %.1f GB/s; one cuMemcpyPeer "
                                    + "%.3f ms = %.1f GB/s; ratio %.2f%n",
                            size.label(),
                            plan,
                            writes.size(),
                            bytes / 1048576.0,
                            ms,
                            gbps,
                            referenceMs,
                            referenceGbps,
                            gbps / referenceGbps);
                    String metric = "pd_nvlink_handoff_" + size.label()
                            + (plan.equals("contiguous") ? "" : "_fragmented") + "_gbps";
                    BenchRow row =
                            BenchRow.higherIsBetter(metric, gbps, "GB/s", "one_cuMemcpyPeer_same_bytes", referenceGbps);
                    rows.add(plan.equals("contiguous") ? row.withAim(0.8) : row);
                }
            }
            long expected = IpcPeerMain.crc(model);
            long actual = Long.parseLong(IpcPeer.ask(decode, "crc 0 " + poolBytes, "crc"));
            log.printf(
                    Locale.ROOT,
                    "nvlink: the decode's pool CRC-32C %08x, the model's %08x: %s%n",
                    actual,
                    expected,
                    actual == expected ? "every byte as it must be" : "WRONG BYTES");
            rows.add(new BenchRow(
                    "pd_nvlink_pools_with_wrong_bytes",
                    actual == expected ? 0 : 1,
                    "pools",
                    "pools_checked",
                    1,
                    actual == expected ? 0 : 1,
                    "lower"));
        } finally {
            decode.kill();
            try (var files = Files.walk(shmDir)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
        return rows;
    }

    /** One write per run of pages consecutive on both sides, per layer and part (as the PD planner merges them). */
    private static List<TransferRequest> plan(
            PageFormat format, int poolPages, MemorySegment prefillKv, int[] source, int[] target) {
        List<TransferRequest> writes = new ArrayList<>();
        long chunk = DeviceLayout.chunkBytes(format);
        for (int layer = 0; layer < format.geometry().layers(); layer++) {
            for (int part = 0; part < format.geometry().attention().parts(); part++) {
                for (int i = 0; i < source.length; ) {
                    int run = 1;
                    while (i + run < source.length
                            && source[i + run] == source[i] + run
                            && target[i + run] == target[i] + run) {
                        run++;
                    }
                    long from = DeviceLayout.chunkOffset(format, poolPages, source[i], layer, part);
                    long to = DeviceLayout.chunkOffset(format, poolPages, target[i], layer, part);
                    writes.add(TransferRequest.write(prefillKv.asSlice(from, run * chunk), "kv", to));
                    i += run;
                }
            }
        }
        return writes;
    }

    /** What the decode's pool holds after the plan: the prefill's pattern at each target chunk. */
    private static void apply(PageFormat format, int poolPages, MemorySegment model, int[] source, int[] target) {
        long chunk = DeviceLayout.chunkBytes(format);
        for (int layer = 0; layer < format.geometry().layers(); layer++) {
            for (int part = 0; part < format.geometry().attention().parts(); part++) {
                for (int i = 0; i < source.length; i++) {
                    long from = DeviceLayout.chunkOffset(format, poolPages, source[i], layer, part);
                    long to = DeviceLayout.chunkOffset(format, poolPages, target[i], layer, part);
                    for (long w = 0; w < chunk; w += 8) {
                        model.set(
                                ValueLayout.JAVA_LONG_UNALIGNED, to + w, TransferPatterns.word(PREFILL_SEED, from + w));
                    }
                }
            }
        }
    }

    private static void handoff(TransferEngine prefill, RemoteSegment segment, List<TransferRequest> writes)
            throws InterruptedException {
        TransferBatch batch = prefill.submit(segment, writes, Deadline.after(Duration.ofSeconds(30)));
        if (!batch.await(Duration.ofSeconds(40))) {
            throw new IllegalStateException("a handoff did not end");
        }
        for (int i = 0; i < batch.size(); i++) {
            if (batch.state(i) != RequestState.DONE) {
                throw new IllegalStateException("write " + i + " " + batch.state(i) + ": " + batch.reason(i));
            }
        }
    }

    /** The median of {@code repeats} timed runs after one warm-up, in milliseconds. */
    private static double time(int repeats, Callable<Void> body) throws Exception {
        body.call();
        double[] ms = new double[repeats];
        for (int r = 0; r < repeats; r++) {
            long t0 = System.nanoTime();
            body.call();
            ms[r] = PdHandoffGpu.millisSince(t0);
        }
        return PdHandoffGpu.median(ms);
    }
}
