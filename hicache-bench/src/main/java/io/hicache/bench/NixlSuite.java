package io.hicache.bench;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.storage.nixl.NixlPageStore;
import io.hicache.storage.nixl.NixlStoreConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * {@code nixl}: the NIXL store with the POSIX plugin against the file store of {@code storage-file} and against
 * {@code dd} with direct I/O, on the same folder, in alternating rounds: batches of 128 pages of 1 MiB put and got,
 * both stores with direct I/O and 8 I/O threads so the disk, not the page cache, is measured. Then what the
 * registration cache saves: gets of 128 pages of 64 KiB from the page cache (buffered, so the per-page open and close
 * show) with the cache on against the same store with it off (SGLang's register-per-transfer). Gets are checked
 * against the bytes put.
 *
 * <p>The folder is the {@code file} suite's ({@code HICACHE_BENCH_DIR}, else the temporary folder). Stateless;
 * cleans up what it writes.
 */
public final class NixlSuite implements BenchSuite {
    private static final int BATCH = FileSuite.BATCH;
    private static final int PAGE_BYTES = 1 << 20;
    private static final int SMALL_PAGE_BYTES = 64 << 10;
    private static final long ROUND_BYTES = 256L << 20;
    private static final long LARGE_CAPACITY = 64L << 30;

    @Override
    public String name() {
        return "nixl";
    }

    @Override
    public String description() {
        return "NIXL store (POSIX plugin) vs file store and dd direct I/O, 128 x 1 MiB; registration cache on vs off";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        Path dir = Files.createTempDirectory(FileSuite.benchDir(), "hicache-bench-nixl");
        List<BenchRow> rows = new ArrayList<>();
        Comparison comparison = quick
                ? Comparison.forRun(true)
                : Comparison.forRun(false, 1, 8, 250).withMinItemsPerRound(ROUND_BYTES);
        Namespace ns = Namespace.of("bench/nixl", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        try (Arena arena = Arena.ofShared();
                FileSuite.Dd dd = new FileSuite.Dd(dir, BATCH * PAGE_BYTES >> 20)) {
            List<MemorySegment> sources = randomPages(arena, PAGE_BYTES, 1);
            List<MemorySegment> targets = randomPages(arena, PAGE_BYTES, 2);
            long batchBytes = (long) BATCH * PAGE_BYTES;
            try (PageStore nixl = NixlPageStore.open(NixlStoreConfig.posix(List.of(dir.resolve("nixl")))
                            .withDirectIo(true)
                            .withCapacityBytes(LARGE_CAPACITY));
                    PageStore file = FilePageStore.open(FileStoreConfig.at(dir.resolve("file"))
                            .withDirectIo(true)
                            .withCapacityBytes(LARGE_CAPACITY))) {
                Round nixlPut = new Round(nixl, ns, sources, 1_000_000);
                Round filePut = new Round(file, ns, sources, 2_000_000);
                rows.add(BenchRow.higherIsBetter(
                        "nixl_posix_put_1m_direct_io",
                        "GB/s",
                        "file_store_put_1m_direct_io",
                        comparison.measure(nixlPut::put, filePut::put),
                        1e-9));
                rows.add(BenchRow.higherIsBetter(
                        "nixl_posix_put_1m_direct_io_vs_dd",
                        "GB/s",
                        "dd_write_direct_1m",
                        comparison.measure(nixlPut::put, () -> dd.write(batchBytes, 1 << 20)),
                        1e-9));
                List<StoreKey> inNixl = FileSuite.keys(ns, 1_000_000);
                List<StoreKey> inFile = FileSuite.keys(ns, 2_000_000);
                Comparison.Workload nixlGet = () -> get(nixl, inNixl, targets, batchBytes);
                rows.add(BenchRow.higherIsBetter(
                        "nixl_posix_get_1m_direct_io",
                        "GB/s",
                        "file_store_get_1m_direct_io",
                        comparison.measure(nixlGet, () -> get(file, inFile, targets, batchBytes)),
                        1e-9));
                rows.add(BenchRow.higherIsBetter(
                        "nixl_posix_get_1m_direct_io_vs_dd",
                        "GB/s",
                        "dd_read_direct_1m",
                        comparison.measure(nixlGet, () -> dd.read(batchBytes, 1 << 20)),
                        1e-9));
                check(sources, targets, "nixl");
            }
            rows.add(registrationCache(dir, ns, arena, comparison));
        } finally {
            FileSuite.deleteTree(dir);
        }
        return rows;
    }

    /** Gets of small pages from the page cache, registration cache on against off. */
    private static BenchRow registrationCache(Path dir, Namespace ns, Arena arena, Comparison comparison)
            throws Exception {
        List<MemorySegment> sources = randomPages(arena, SMALL_PAGE_BYTES, 3);
        List<MemorySegment> targets = randomPages(arena, SMALL_PAGE_BYTES, 4);
        long batchBytes = (long) BATCH * SMALL_PAGE_BYTES;
        NixlStoreConfig base =
                NixlStoreConfig.posix(List.of(dir.resolve("nixl-small"))).withCapacityBytes(LARGE_CAPACITY);
        List<StoreKey> keys = FileSuite.keys(ns, 3_000_000);
        try (NixlPageStore cached = NixlPageStore.open(base);
                NixlPageStore uncached = NixlPageStore.open(base.withRegistrationCache(0))) {
            FileSuite.requireAll(
                    cached.put(PageBatch.of(keys, sources), FileSuite.deadline())
                            .get(10, TimeUnit.MINUTES),
                    "put");
            Comparison.Result r = comparison.measure(
                    () -> get(cached, keys, targets, batchBytes), () -> get(uncached, keys, targets, batchBytes));
            check(sources, targets, "nixl (64 KiB)");
            long[] hm = cached.registrationCacheHitsAndMisses();
            System.err.printf("nixl registration cache: %d reads reused a registration, %d registered%n", hm[0], hm[1]);
            return BenchRow.higherIsBetter(
                    "nixl_posix_get_64k_buffered_registration_cache",
                    "GB/s",
                    "nixl_posix_get_64k_buffered_register_per_transfer",
                    r,
                    1e-9);
        }
    }

    private static long get(PageStore store, List<StoreKey> keys, List<MemorySegment> targets, long bytes)
            throws Exception {
        FileSuite.requireAll(
                store.get(PageBatch.of(keys, targets), FileSuite.deadline()).get(10, TimeUnit.MINUTES), "get");
        return bytes;
    }

    private static List<MemorySegment> randomPages(Arena arena, int pageBytes, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        List<MemorySegment> pages = new ArrayList<>(BATCH);
        for (int i = 0; i < BATCH; i++) {
            MemorySegment page = arena.allocate(pageBytes, 4096);
            for (long off = 0; off < pageBytes; off += 8) {
                page.set(ValueLayout.JAVA_LONG_UNALIGNED, off, random.nextLong());
            }
            pages.add(page);
        }
        return pages;
    }

    private static void check(List<MemorySegment> sources, List<MemorySegment> targets, String store) {
        for (int i = 0; i < sources.size(); i++) {
            long n = sources.get(i).byteSize();
            if (MemorySegment.mismatch(sources.get(i), 0, n, targets.get(i), 0, n) >= 0) {
                throw new IllegalStateException(store + " returned wrong bytes for page " + i);
            }
        }
    }

    /** Puts of fresh keys each round (the first round's keys are the ones later got). Not thread-safe. */
    private static final class Round {
        private final PageStore store;
        private final Namespace ns;
        private final List<MemorySegment> sources;
        private int round;

        Round(PageStore store, Namespace ns, List<MemorySegment> sources, int firstRound) {
            this.store = store;
            this.ns = ns;
            this.sources = sources;
            this.round = firstRound;
        }

        long put() throws Exception {
            FileSuite.requireAll(
                    store.put(PageBatch.of(FileSuite.keys(ns, round++), sources), FileSuite.deadline())
                            .get(10, TimeUnit.MINUTES),
                    "put");
            return (long) sources.size() * sources.getFirst().byteSize();
        }
    }
}
