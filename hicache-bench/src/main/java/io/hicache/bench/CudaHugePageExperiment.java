package io.hicache.bench;

import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.cuda.CudaDeviceRuntime;
import io.hicache.core.memory.cuda.CudaTuning;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Does the host slab's page size matter to the kernel? The scattered-page measurement at 16 KiB and 256 KiB
 * (page_first_direct and layer_first) on three slabs of the same size: a /dev/shm mapping as the host pool makes
 * it (4 KiB pages), the same with {@code madvise(MADV_HUGEPAGE)}, and anonymous memory with
 * {@code madvise(MADV_HUGEPAGE)}; prints the machine's transparent huge page settings and how much of each slab
 * huge pages back. A GPU behind an IOMMU translates every host address it reads; scattered reads over 4 KiB pages
 * may miss its translation caches. Stateless.
 */
final class CudaHugePageExperiment {
    private static final int MADV_HUGEPAGE = 14;

    private CudaHugePageExperiment() {
    }

    static List<BenchRow> run(boolean quick) throws Exception {
        for (String f : List.of("/sys/kernel/mm/transparent_hugepage/enabled",
                "/sys/kernel/mm/transparent_hugepage/shmem_enabled")) {
            System.out.println(f + ": " + read(Path.of(f)));
        }
        List<BenchRow> rows = new CudaSuite.Progress();
        int pages = quick ? 1024 : CudaSuite.PAGES;
        long bytes = Math.max(1L << 30, 2L * pages * new PageFormat(MemorySuite.GEOMETRY, 16, HostLayout.PAGE_FIRST).pageBytes());
        Comparison comparison = Comparison.forRun(quick, 1, 4, 150);
        for (String kind : List.of("shm_4k", "shm_madvise", "anon_madvise")) {
            Path file = Files.createTempFile(Path.of("/dev/shm"), "hicache-bench-huge", ".slab");
            try (CudaDeviceRuntime runtime = new CudaDeviceRuntime(0, true, CudaDeviceRuntime.REGISTER_SLICE_BYTES,
                    CudaTuning.DEFAULT); Arena arena = Arena.ofShared()) {
                MemorySegment slab;
                if (kind.startsWith("shm")) {
                    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                        slab = channel.map(FileChannel.MapMode.READ_WRITE, 0, bytes, arena);
                    }
                } else {
                    slab = arena.allocate(bytes, 2L << 20);
                }
                if (kind.endsWith("madvise")) {
                    System.out.println(kind + ": madvise returned " + madvise(slab));
                }
                slab.fill((byte) 0x3C);
                System.out.println(kind + ": huge pages backing it: " + hugeKiB(slab) + " KiB of " + (bytes >> 10));
                try (HostRegistration pinned = runtime.registerHost(slab)) {
                    System.out.println(kind + ": pinned " + pinned.bytes() + " bytes");
                    for (int tokens : new int[] {1, 16}) {
                        CudaSuite.scattered(runtime, slab, tokens, pages, List.of(HostLayout.LAYER_FIRST,
                                HostLayout.PAGE_FIRST_DIRECT), comparison, null, kind + "__", rows, arena);
                    }
                }
            } finally {
                Files.deleteIfExists(file);
            }
        }
        return rows;
    }

    @SuppressWarnings("restricted") // madvise through FFM: the point of the experiment
    private static int madvise(MemorySegment m) {
        Linker linker = Linker.nativeLinker();
        MethodHandle h = linker.downcallHandle(linker.defaultLookup().find("madvise").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
        try {
            return (int) h.invokeExact(m, m.byteSize(), MADV_HUGEPAGE);
        } catch (Throwable t) {
            throw new IllegalStateException("madvise failed", t);
        }
    }

    /** AnonHugePages + ShmemPmdMapped of the mapping that starts at the slab's address, from /proc/self/smaps. */
    private static long hugeKiB(MemorySegment m) throws IOException {
        String start = Long.toHexString(m.address());
        boolean in = false;
        long kib = 0;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) {
                in = line.startsWith(start + "-");
            } else if (in && (line.startsWith("AnonHugePages:") || line.startsWith("ShmemPmdMapped:")
                    || line.startsWith("FilePmdMapped:"))) {
                kib += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return kib;
    }

    private static String read(Path p) {
        try {
            return Files.readString(p).trim();
        } catch (IOException e) {
            return "unreadable (" + e.getMessage() + ")";
        }
    }
}
