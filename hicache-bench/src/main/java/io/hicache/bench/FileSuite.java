package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.storage.rocksdb.RocksDbPageStore;
import io.hicache.storage.rocksdb.RocksDbStoreConfig;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * {@code file}: the local stores against the disk they sit on. Batches of 128 pages of 64 KiB and 1 MiB, put and
 * then got, through the file store and the RocksDB store, both with direct I/O so the page cache cannot serve what
 * should come from the disk; against {@code dd} with direct I/O and blocks of the page's size (64 KiB or 1 MiB) writing
 * and reading the same number of bytes in the same folder, in alternating rounds. Every round moves at least 256 MiB and every case at least
 * 2 GiB each side. Gets are checked against the bytes put.
 *
 * <p>The folder is {@code HICACHE_BENCH_DIR} (or the {@code hicache.bench.dir} property), else the temporary
 * folder; it must be on the disk to measure and take direct I/O. Stateless; cleans up what it writes.
 */
public final class FileSuite implements BenchSuite {
    static final int BATCH = 128;
    static final int[] PAGE_BYTES = {64 * 1024, 1024 * 1024};
    private static final long ROUND_BYTES = 256L << 20;

    @Override
    public String name() {
        return "file";
    }

    @Override
    public String description() {
        return "file and RocksDB stores: put/get of 128-page batches (64 KiB, 1 MiB) with direct I/O vs dd direct I/O";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        Path base = benchDir();
        Path dir = Files.createTempDirectory(base, "hicache-bench-file");
        List<BenchRow> rows = new ArrayList<>();
        Comparison comparison = quick
                ? Comparison.forRun(true)
                : Comparison.forRun(false, 1, 8, 250).withMinItemsPerRound(ROUND_BYTES);
        try (Arena arena = Arena.ofShared();
                Dd dd = new Dd(dir, BATCH * PAGE_BYTES[PAGE_BYTES.length - 1] >> 20)) {
            for (int pageBytes : PAGE_BYTES) {
                measure(
                        "file",
                        config -> FilePageStore.open(
                                FileStoreConfig.at(config).withDirectIo(true).withCapacityBytes(64L << 30)),
                        dir,
                        pageBytes,
                        comparison,
                        dd,
                        arena,
                        rows);
                measure(
                        "rocksdb",
                        config -> RocksDbPageStore.open(
                                RocksDbStoreConfig.at(config).withDirectIo(true).withCapacityBytes(64L << 30)),
                        dir,
                        pageBytes,
                        comparison,
                        dd,
                        arena,
                        rows);
            }
        } finally {
            deleteTree(dir);
        }
        return rows;
    }

    private static void measure(
            String store,
            Function<Path, PageStore> open,
            Path dir,
            int pageBytes,
            Comparison comparison,
            Dd dd,
            Arena arena,
            List<BenchRow> rows)
            throws Exception {
        Path root = dir.resolve(store + "-" + (pageBytes >> 10) + "k");
        Namespace ns = Namespace.of("bench/file", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        List<MemorySegment> sources = new ArrayList<>(BATCH);
        List<MemorySegment> targets = new ArrayList<>(BATCH);
        SplittableRandom random = new SplittableRandom(pageBytes);
        for (int i = 0; i < BATCH; i++) {
            MemorySegment page = arena.allocate(pageBytes, 4096);
            for (long off = 0; off < pageBytes; off += 8) {
                page.set(ValueLayout.JAVA_LONG_UNALIGNED, off, random.nextLong());
            }
            sources.add(page);
            targets.add(arena.allocate(pageBytes, 4096));
        }
        long batchBytes = (long) BATCH * pageBytes;
        try (PageStore s = open.apply(root)) {
            int[] round = {0};
            Comparison.Workload put = () -> {
                List<StoreKey> keys = keys(ns, round[0]++);
                requireAll(s.put(PageBatch.of(keys, sources), deadline()).get(10, TimeUnit.MINUTES), "put");
                return batchBytes;
            };
            String block = pageBytes >= 1 << 20 ? (pageBytes >> 20) + "m" : (pageBytes >> 10) + "k";
            rows.add(BenchRow.higherIsBetter(
                    store + "_put_" + (pageBytes >> 10) + "k_direct_io",
                    "GB/s",
                    "dd_write_direct_" + block,
                    comparison.measure(put, () -> dd.write(batchBytes, pageBytes)),
                    1e-9));
            List<StoreKey> stored = keys(ns, 0);
            Comparison.Workload get = () -> {
                requireAll(s.get(PageBatch.of(stored, targets), deadline()).get(10, TimeUnit.MINUTES), "get");
                return batchBytes;
            };
            rows.add(BenchRow.higherIsBetter(
                    store + "_get_" + (pageBytes >> 10) + "k_direct_io",
                    "GB/s",
                    "dd_read_direct_" + block,
                    comparison.measure(get, () -> dd.read(batchBytes, pageBytes)),
                    1e-9));
            for (int i = 0; i < BATCH; i++) {
                if (MemorySegment.mismatch(sources.get(i), 0, pageBytes, targets.get(i), 0, pageBytes) >= 0) {
                    throw new IllegalStateException(store + " returned wrong bytes for page " + i);
                }
            }
        }
        deleteTree(root);
    }

    static List<StoreKey> keys(Namespace ns, int round) {
        List<StoreKey> keys = new ArrayList<>(BATCH);
        for (int i = 0; i < BATCH; i++) {
            keys.add(ns.key(PageHash.fromHex(String.format("%016x%016x", round, i) + "0".repeat(31) + "1")));
        }
        return keys;
    }

    static void requireAll(BatchResult r, String what) {
        if (r.count(PageStatus.OK) + r.count(PageStatus.EXISTS) != r.size()) {
            throw new IllegalStateException(what + " did not complete: " + r);
        }
    }

    static Deadline deadline() {
        return Deadline.after(Duration.ofMinutes(10));
    }

    static Path benchDir() {
        String chosen = System.getenv("HICACHE_BENCH_DIR");
        if (chosen == null || chosen.isBlank()) {
            chosen = System.getProperty("hicache.bench.dir", System.getProperty("java.io.tmpdir"));
        }
        return Path.of(chosen);
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    /**
     * The reference: {@code dd} with direct I/O and blocks of the page's size (one request per page, queue depth 1), writing a fresh file of the batch's size from
     * random bytes held in memory (zeros might be short-cut by the virtual disk), and reading back a file written
     * earlier. Not thread-safe; deletes its files on close.
     */
    static final class Dd implements AutoCloseable {
        private final Path dir;
        private final Path source;
        private final Path readFile;
        private int written;

        Dd(Path dir, int sourceMiB) throws IOException, InterruptedException {
            this.dir = dir;
            Path shm = Path.of("/dev/shm");
            this.source = Files.createTempFile(Files.isDirectory(shm) ? shm : dir, "hicache-bench-dd", ".src");
            SplittableRandom random = new SplittableRandom(1);
            byte[] chunk = new byte[1 << 20];
            try (var out = Files.newOutputStream(source)) {
                for (int i = 0; i < sourceMiB; i++) {
                    random.nextBytes(chunk);
                    out.write(chunk);
                }
            }
            this.readFile = dir.resolve("dd-read.bin");
            dd("if=" + source, "of=" + readFile, "bs=1M", "oflag=direct");
        }

        long write(long bytes, int blockBytes) throws IOException, InterruptedException {
            Path target = dir.resolve("dd-write-" + (written++ % 2) + ".bin");
            Files.deleteIfExists(target);
            dd("if=" + source, "of=" + target, "bs=" + blockBytes, "count=" + bytes / blockBytes, "oflag=direct");
            return bytes;
        }

        long read(long bytes, int blockBytes) throws IOException, InterruptedException {
            dd("if=" + readFile, "of=/dev/null", "bs=" + blockBytes, "count=" + bytes / blockBytes, "iflag=direct");
            return bytes;
        }

        private static void dd(String... args) throws IOException, InterruptedException {
            List<String> command = new ArrayList<>(List.of("dd", "status=none"));
            command.addAll(List.of(args));
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (p.waitFor() != 0) {
                throw new IOException(String.join(" ", command) + " failed: " + out);
            }
        }

        @Override
        public void close() throws IOException {
            Files.deleteIfExists(source);
        }
    }
}
