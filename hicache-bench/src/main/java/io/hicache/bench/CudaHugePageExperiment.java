package io.hicache.bench;

import io.hicache.core.memory.HostRegistration;
import io.hicache.core.page.HostLayout;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaOptions;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Does the host slab's page size matter to the kernel? The scattered-page measurement at 16 KiB and 64 KiB
 * (layer_first and page_first_direct) on slabs of the same size in /dev/shm (4 KiB pages unless the machine's
 * tmpfs gives huge ones) and in each folder given: a tmpfs mounted with {@code huge=always}, or hugetlbfs. Prints
 * the machine's huge page settings and how much of each slab huge pages back. A GPU reads host memory through
 * address translation (its own page tables, and an IOMMU where there is one); scattered 256-byte reads over 4 KiB
 * pages may miss the translation caches. Stateless.
 */
final class CudaHugePageExperiment {
    private CudaHugePageExperiment() {}

    static List<BenchRow> run(boolean quick, List<Path> hugeDirs) throws Exception {
        for (String f : List.of(
                "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/shmem_enabled")) {
            System.out.println(f + ": " + read(Path.of(f)));
        }
        Files.readAllLines(Path.of("/proc/meminfo")).stream()
                .filter(l -> l.contains("Huge"))
                .forEach(System.out::println);
        List<BenchRow> rows = new CudaSuite.Progress();
        int pages = quick ? 1024 : CudaSuite.PAGES;
        long bytes = CudaSuite.slabBytes(pages);
        Comparison comparison = Comparison.forRun(quick, 1, 4, 150);
        List<Path> dirs = new ArrayList<>();
        dirs.add(CudaSuite.DEFAULT_SLAB_DIR);
        dirs.addAll(hugeDirs);
        for (Path dir : dirs) {
            String kind = dir.toString().replaceAll("[^A-Za-z0-9]+", "_").replaceAll("^_", "");
            Path file = Files.createTempFile(dir, "hicache-bench-huge", ".slab");
            try (CudaDeviceRuntime runtime = new CudaDeviceRuntime(CudaOptions.defaults());
                    Arena arena = Arena.ofShared()) {
                MemorySegment slab = CudaSuite.map(file, bytes, arena);
                System.out.println(kind + ": huge pages backing it: " + hugeKiB(slab) + " KiB of " + (bytes >> 10));
                try (HostRegistration pinned = runtime.registerHost(slab)) {
                    System.out.println(kind + ": pinned " + pinned.bytes() + " bytes");
                    for (int tokens : new int[] {1, 4}) {
                        CudaSuite.scattered(
                                runtime,
                                slab,
                                tokens,
                                pages,
                                List.of(HostLayout.LAYER_FIRST, HostLayout.PAGE_FIRST_DIRECT),
                                comparison,
                                null,
                                kind + "__",
                                rows,
                                arena);
                    }
                }
            } finally {
                Files.deleteIfExists(file);
            }
        }
        return rows;
    }

    /** Huge-page-backed KiB of the mapping that starts at the slab's address, from /proc/self/smaps. */
    private static long hugeKiB(MemorySegment m) throws IOException {
        String start = Long.toHexString(m.address());
        boolean in = false;
        long kib = 0;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) {
                in = line.startsWith(start + "-");
            } else if (in
                    && (line.startsWith("AnonHugePages:")
                            || line.startsWith("ShmemPmdMapped:")
                            || line.startsWith("FilePmdMapped:")
                            || line.startsWith("Shared_Hugetlb:")
                            || line.startsWith("Private_Hugetlb:"))) {
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
