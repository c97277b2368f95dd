package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.WaitMode;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.cuda.ContiguousCopy;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntimeProvider;
import io.hicache.cuda.CudaOptions;
import io.hicache.cuda.CudaTuning;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Random;
import org.jspecify.annotations.Nullable;

/**
 * {@code cuda}: the CUDA device runtime on a GPU, in one run.
 *
 * <ul>
 *   <li>The link's ceiling: one 1 GiB copy each way between pinned host memory (a registered /dev/shm mapping, as
 *       the host slab is) and the device, against the same copy from unpinned host memory.
 *   <li>8192 scattered pages of 16 KiB, 64 KiB and 256 KiB, each host layout, both directions, through the copy
 *       kernel, against one contiguous pinned copy of the same bytes: one copy at a time, each awaited (both by
 *       spinning, so that neither pays a thread's wake-up), and 8 copies
 *       in flight against 8 contiguous copies in flight; and through the copy engine (one
 *       {@code cuMemcpy2DAsync} per page and part), against the kernel.
 *   <li>A per-layer load of one request's pages: when each layer becomes ready.
 * </ul>
 *
 * Pages are Llama-3.1-8B's on 8 tensor-parallel ranks, as in {@link MemorySuite}: 16 KiB per token, so pages of 1,
 * 4 and 16 tokens, moved as runs of 256 B, 1 KiB and 4 KiB. After each configuration a sample of pages is read back
 * and compared byte for byte: a fast copy of the wrong bytes fails the suite. Stateless.
 */
public final class CudaSuite implements BenchSuite {
    static final int[] PAGE_TOKENS = {1, 4, 16};
    static final int PAGES = 8192;
    /** Copies submitted back to back in the in-flight rows: how a server keeps the link busy. */
    static final int IN_FLIGHT = 8;

    private static final long GIB = 1L << 30;
    static final Path DEFAULT_SLAB_DIR = Path.of("/dev/shm");

    @Override
    public String name() {
        return "cuda";
    }

    @Override
    public String description() {
        return "CUDA: pinned link ceiling; 8192 scattered pages through the kernel and the copy engine; per-layer load";
    }

    /** Where the pinned slab's file is made: a tmpfs or hugetlbfs folder. */
    private final Path slabDir;

    /** The suite with its slab in /dev/shm, where the host pool keeps it by default. */
    public CudaSuite() {
        this(DEFAULT_SLAB_DIR);
    }

    /** The suite with its slab in {@code slabDir} (tmpfs or hugetlbfs: the only file systems CUDA can pin). */
    public CudaSuite(Path slabDir) {
        this.slabDir = slabDir;
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new Progress();
        int pages = quick ? 1024 : PAGES;
        withPinnedSlab(slabDir, pages, CudaTuning.DEFAULT, (runtime, slab, arena) -> {
            ceilings(runtime, slab, quick, rows, arena);
            Comparison comparison = Comparison.forRun(quick, 2, 6, 250);
            Comparison slow = Comparison.forRun(quick, 1, 3, 250);
            for (int tokens : PAGE_TOKENS) {
                scattered(
                        runtime, slab, tokens, pages, List.of(HostLayout.values()), comparison, slow, "", rows, arena);
            }
            layerTimes(runtime, slab, quick, rows);
        });
        return rows;
    }

    /** What runs against a runtime and its registered slab. */
    @FunctionalInterface
    interface SlabAction {
        void run(CudaDeviceRuntime runtime, MemorySegment slab, Arena arena) throws Exception;
    }

    /**
     * Opens device 0 shaped by {@code tuning}, maps a slab in /dev/shm big enough for {@code pages} pages of every
     * size twice over, registers it, runs {@code action}, and releases all of it.
     */
    static void withPinnedSlab(int pages, CudaTuning tuning, SlabAction action) throws Exception {
        withPinnedSlab(DEFAULT_SLAB_DIR, pages, tuning, action);
    }

    /** As {@link #withPinnedSlab(int, CudaTuning, SlabAction)}, with the slab's file in {@code dir}. */
    static void withPinnedSlab(Path dir, int pages, CudaTuning tuning, SlabAction action) throws Exception {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        if (why.isPresent()) {
            throw new HiCacheException(
                    ErrorCode.DEVICE_UNAVAILABLE, "the cuda suite needs a CUDA device: " + why.get());
        }
        long slabBytes = slabBytes(pages);
        Path file = Files.createTempFile(dir, "hicache-bench-cuda", ".slab");
        try (CudaDeviceRuntime runtime =
                        new CudaDeviceRuntime(CudaOptions.defaults().withTuning(tuning));
                Arena arena = Arena.ofShared()) {
            MemorySegment slab = map(file, slabBytes, arena);
            try (HostRegistration pinned = runtime.registerHost(slab)) {
                if (!pinned.pinned()) {
                    throw new IllegalStateException("the CUDA runtime did not pin the slab");
                }
                action.run(runtime, slab, arena);
            }
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** A slab for {@code pages} pages of every size twice over, at least 1 GiB: a whole number of 2 MiB huge pages. */
    static long slabBytes(int pages) {
        return Math.max(GIB, 2L * pages * new PageFormat(MemorySuite.GEOMETRY, 16, HostLayout.PAGE_FIRST).pageBytes());
    }

    static MemorySegment map(Path file, long bytes, Arena arena) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MemorySegment m = channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
            m.fill((byte) 0x3C);
            return m;
        }
    }

    /* ---------------------------------------------------------------- the link's ceiling */

    private static void ceilings(
            CudaDeviceRuntime runtime, MemorySegment pinned, boolean quick, List<BenchRow> rows, Arena arena)
            throws Exception {
        long bytes = quick ? GIB / 4 : GIB;
        MemorySegment unpinned = arena.allocate(bytes, 4096);
        unpinned.fill((byte) 0x5A);
        Comparison comparison = Comparison.forRun(quick, 2, 6, 300);
        try (ContiguousCopy device = new ContiguousCopy(runtime, bytes);
                ContiguousCopy scratch = new ContiguousCopy(runtime, bytes)) {
            for (boolean toHost : new boolean[] {false, true}) {
                Comparison.Workload pinnedCopy = () -> {
                    device.copy(pinned, bytes, toHost);
                    return bytes;
                };
                Comparison.Workload pageable = () -> {
                    scratch.copyPageable(unpinned, bytes, toHost);
                    return bytes;
                };
                rows.add(BenchRow.higherIsBetter(
                        "pinned_copy_" + direction(toHost) + "_" + (bytes >> 20) + "m",
                        "GB/s",
                        "pageable_copy_same_bytes",
                        comparison.measure(pinnedCopy, pageable),
                        1e-9));
            }
        }
    }

    /* ---------------------------------------------------------------- scattered pages */

    /**
     * Moves {@code pages} random pages of {@code tokens} tokens each way for each of {@code layouts}: through the
     * kernel against contiguous pinned copies of the same bytes (one at a time, then {@link #IN_FLIGHT} in flight),
     * and (unless {@code engineComparison} is null)
     * through the kernel against the copy engine; then verifies a sample of pages both ways. Row names start with
     * {@code prefix}.
     */
    static void scattered(
            CudaDeviceRuntime runtime,
            MemorySegment slab,
            int tokens,
            int pages,
            List<HostLayout> layouts,
            Comparison comparison,
            @Nullable Comparison engineComparison,
            String prefix,
            List<BenchRow> rows,
            Arena arena)
            throws Exception {
        scattered(runtime, slab, tokens, pages, layouts, comparison, engineComparison, prefix, rows, arena, false);
    }

    /** As above; with {@code hostAscending} the pairs are handed over in ascending host slot order. */
    static void scattered(
            CudaDeviceRuntime runtime,
            MemorySegment slab,
            int tokens,
            int pages,
            List<HostLayout> layouts,
            Comparison comparison,
            @Nullable Comparison engineComparison,
            String prefix,
            List<BenchRow> rows,
            Arena arena,
            boolean hostAscending)
            throws Exception {
        Random random = new Random(tokens);
        int devicePages = 2 * pages;
        int hostSlots = 2 * pages;
        PageFormat deviceFormat = new PageFormat(MemorySuite.GEOMETRY, tokens, HostLayout.PAGE_FIRST_DIRECT);
        long bytes = (long) pages * deviceFormat.pageBytes();
        try (KvPool kernelPool = runtime.createPool(deviceFormat, devicePages, true);
                KvPool enginePool = runtime.createPool(deviceFormat, devicePages, false);
                ContiguousCopy contiguous = new ContiguousCopy(runtime, bytes)) {
            fillPages(slab, deviceFormat.pageBytes(), hostSlots, arena);
            for (HostLayout layout : layouts) {
                PageFormat format = new PageFormat(MemorySuite.GEOMETRY, tokens, layout);
                HostSlab host = new HostSlab(slab, format, hostSlots);
                int[] device = pick(random, devicePages, pages);
                int[] slots = pick(random, hostSlots, pages);
                if (hostAscending) {
                    sortBySlot(device, slots);
                }
                String size = (format.pageBytes() >> 10) + "k_" + layout;
                for (boolean toHost : new boolean[] {false, true}) {
                    Comparison.Workload kernel = () -> copy(kernelPool, host, device, slots, toHost, bytes);
                    Comparison.Workload engine = () -> copy(enginePool, host, device, slots, toHost, bytes);
                    Comparison.Workload reference = () -> {
                        contiguous.copy(slab, bytes, toHost);
                        return bytes;
                    };
                    rows.add(BenchRow.higherIsBetter(
                            prefix + "kernel_" + direction(toHost) + "_" + size,
                            "GB/s",
                            "contiguous_pinned_copy",
                            comparison.measure(kernel, reference),
                            1e-9));
                    Comparison.Workload kernels = () -> {
                        List<KvCopy> copies = new ArrayList<>(IN_FLIGHT);
                        for (int i = 0; i < IN_FLIGHT; i++) {
                            copies.add(
                                    toHost
                                            ? kernelPool.backup(device, host, slots)
                                            : kernelPool.load(host, slots, device));
                        }
                        for (KvCopy c : copies) {
                            await(c);
                        }
                        return IN_FLIGHT * bytes;
                    };
                    Comparison.Workload references = () -> {
                        for (int i = 0; i < IN_FLIGHT; i++) {
                            contiguous.enqueue(slab, bytes, toHost);
                        }
                        contiguous.await();
                        return IN_FLIGHT * bytes;
                    };
                    rows.add(BenchRow.higherIsBetter(
                            prefix + "kernel_" + direction(toHost) + "_" + size + "_" + IN_FLIGHT + "_in_flight",
                            "GB/s",
                            "contiguous_pinned_copies_" + IN_FLIGHT + "_in_flight",
                            comparison.measure(kernels, references),
                            1e-9));
                    if (engineComparison != null) {
                        rows.add(BenchRow.higherIsBetter(
                                prefix + "kernel_vs_copy_engine_" + direction(toHost) + "_" + size,
                                "GB/s",
                                "per_page_cumemcpy2dasync",
                                engineComparison.measure(kernel, engine),
                                1e-9));
                    }
                }
                verify(kernelPool, host, device, slots, arena);
                if (engineComparison != null) {
                    verify(enginePool, host, device, slots, arena);
                }
            }
        }
    }

    private static long copy(KvPool pool, HostSlab host, int[] device, int[] slots, boolean toHost, long bytes)
            throws InterruptedException {
        await(toHost ? pool.backup(device, host, slots) : pool.load(host, slots, device));
        return bytes;
    }

    /** Waits by spinning, as the reference's {@code cuStreamSynchronize} does: both sides pay the same to wake. */
    static void await(KvCopy c) throws InterruptedException {
        if (!c.await(Deadline.after(Duration.ofMinutes(2)), WaitMode.SPIN)) {
            throw new IllegalStateException("a copy took over two minutes");
        }
    }

    /**
     * Loads a sample of host pages and checks each device page byte for byte against its host page; then backs the
     * same device pages up into host slots that were cleared and not used by the measured copies, and checks those.
     */
    private static void verify(KvPool pool, HostSlab host, int[] device, int[] slots, Arena arena)
            throws InterruptedException {
        int sample = Math.min(64, device.length);
        int[] d = Arrays.copyOf(device, sample);
        int[] s = Arrays.copyOf(slots, sample);
        copy(pool, host, d, s, false, 0);
        compare(pool, host, d, s, "load", arena);
        int[] spare = unused(slots, host.slots(), sample);
        MemorySegment zeros = arena.allocate(host.format().pageBytes());
        for (int slot : spare) {
            host.writePage(slot, zeros);
        }
        copy(pool, host, d, spare, true, 0);
        compare(pool, host, d, spare, "backup", arena);
    }

    /** Checks each device page against its host slot, row by row: the two sides order a page's rows differently. */
    private static void compare(KvPool pool, HostSlab host, int[] d, int[] s, String what, Arena arena) {
        PageFormat deviceOrder = pool.format();
        PageFormat hostOrder = host.format();
        MemorySegment fromDevice = arena.allocate(deviceOrder.pageBytes());
        MemorySegment fromHost = arena.allocate(hostOrder.pageBytes());
        int parts = deviceOrder.geometry().attention().parts();
        long row = deviceOrder.rowBytes();
        for (int i = 0; i < d.length; i++) {
            pool.readPage(d[i], fromDevice);
            host.readPage(s[i], fromHost);
            for (int part = 0; part < parts; part++) {
                for (int layer = 0; layer < deviceOrder.geometry().layers(); layer++) {
                    for (int token = 0; token < deviceOrder.pageSizeTokens(); token++) {
                        long a = deviceOrder.rowOffset(part, layer, token);
                        long b = hostOrder.rowOffset(part, layer, token);
                        if (MemorySegment.mismatch(fromDevice, a, a + row, fromHost, b, b + row) >= 0) {
                            throw new IllegalStateException("device page " + d[i] + " differs from host slot " + s[i]
                                    + " at part " + part + ", layer " + layer + ", token " + token + " after a " + what
                                    + " (" + host.layout() + ", " + hostOrder.pageBytes() + "-byte pages, " + pool
                                    + ")");
                        }
                    }
                }
            }
        }
    }

    /** {@code count} host slots below {@code limit} that {@code used} does not hold. */
    private static int[] unused(int[] used, int limit, int count) {
        BitSet taken = new BitSet(limit);
        for (int u : used) {
            taken.set(u);
        }
        int[] out = new int[count];
        int next = 0;
        for (int i = 0; i < count; i++) {
            next = taken.nextClearBit(next);
            Checks.requireState(next < limit, "fewer than %d host slots are unused", count);
            out[i] = next++;
        }
        return out;
    }

    /** Gives every page of the slab different, non-zero bytes. */
    private static void fillPages(MemorySegment slab, long pageBytes, int slots, Arena arena) {
        for (int s = 0; s < slots; s++) {
            long base = s * pageBytes;
            for (long off = 0; off < pageBytes; off += Long.BYTES) {
                slab.set(ValueLayout.JAVA_LONG_UNALIGNED, base + off, (s + 1) * 0x9E3779B97F4A7C15L ^ off);
            }
        }
    }

    /* ---------------------------------------------------------------- per-layer load */

    private static void layerTimes(CudaDeviceRuntime runtime, MemorySegment slab, boolean quick, List<BenchRow> rows)
            throws Exception {
        PageFormat format = new PageFormat(MemorySuite.GEOMETRY, 16, HostLayout.PAGE_FIRST_DIRECT);
        int pages = quick ? 128 : 512;
        int layers = format.geometry().layers();
        HostSlab host = new HostSlab(slab, format, pages);
        int[] slots = new int[pages];
        int[] device = new int[pages];
        for (int i = 0; i < pages; i++) {
            slots[i] = i;
            device[i] = (i * 7) % pages;
        }
        long bytes = (long) pages * format.pageBytes();
        try (KvPool pool = runtime.createPool(format, pages);
                ContiguousCopy contiguous = new ContiguousCopy(runtime, bytes)) {
            double[] first = new double[7];
            double[] last = new double[7];
            double[] reference = new double[7];
            for (int rep = 0; rep < first.length + 2; rep++) {
                long[] ready = new long[layers];
                long start = System.nanoTime();
                KvCopy load = pool.load(host, slots, device);
                for (int l = 0; l < layers; l++) {
                    int layer = l;
                    load.layerDone(l).thenRun(() -> ready[layer] = System.nanoTime());
                }
                if (!load.await(Deadline.after(Duration.ofMinutes(1)))) {
                    throw new IllegalStateException("a load took over a minute");
                }
                for (int l = 1; l < layers; l++) {
                    if (ready[l] < ready[l - 1]) {
                        throw new IllegalStateException("layer " + l + " was ready before layer " + (l - 1));
                    }
                }
                long referenceStart = System.nanoTime();
                contiguous.copy(slab, bytes, false);
                long referenceEnd = System.nanoTime();
                if (rep >= 2) {
                    first[rep - 2] = (ready[0] - start) / 1e6;
                    last[rep - 2] = (ready[layers - 1] - start) / 1e6;
                    reference[rep - 2] = (referenceEnd - referenceStart) / 1e6;
                }
            }
            double total = Forks.median(last);
            String what = "load_" + pages + "_pages_" + (format.pageBytes() >> 10) + "k";
            rows.add(BenchRow.lowerIsBetter(
                    what + "_first_layer_ready",
                    Forks.median(first),
                    "ms",
                    "all_layers_time_divided_by_" + layers,
                    total / layers));
            rows.add(BenchRow.lowerIsBetter(
                    what + "_all_layers_ready",
                    total,
                    "ms",
                    "contiguous_pinned_copy_same_bytes",
                    Forks.median(reference)));
        }
    }

    /** The rows, each printed as it is measured, so a failure later in a long run keeps what came before. */
    static final class Progress extends ArrayList<BenchRow> {
        private static final long serialVersionUID = 1L;

        @Override
        public boolean add(BenchRow row) {
            System.out.printf(
                    Locale.ROOT,
                    "  %-50s %10.3f %-5s vs %-28s %10.3f  ratio %.3f%n",
                    row.metric(),
                    row.value(),
                    row.unit(),
                    row.reference(),
                    row.referenceValue(),
                    row.ratio());
            return super.add(row);
        }
    }

    private static String direction(boolean toHost) {
        return toHost ? "d2h" : "h2d";
    }

    /** Reorders both lists so that {@code slots} ascends, keeping each pair together. */
    static void sortBySlot(int[] device, int[] slots) {
        long[] packed = new long[slots.length];
        for (int i = 0; i < slots.length; i++) {
            packed[i] = (long) slots[i] << 32 | device[i];
        }
        Arrays.sort(packed);
        for (int i = 0; i < slots.length; i++) {
            slots[i] = (int) (packed[i] >>> 32);
            device[i] = (int) packed[i];
        }
    }

    static int[] pick(Random random, int limit, int count) {
        List<Integer> all = new ArrayList<>(limit);
        for (int i = 0; i < limit; i++) {
            all.add(i);
        }
        Collections.shuffle(all, random);
        return all.subList(0, count).stream().mapToInt(Integer::intValue).toArray();
    }
}
