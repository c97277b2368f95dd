package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntimeProvider;
import io.hicache.core.memory.host.HostPagePool;
import io.hicache.core.memory.host.HostPoolConfig;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.util.Checks;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * {@code memory}: the host and device tiers.
 *
 * <ul>
 *   <li>Copies of 128 scattered pages between the host slab (a real tmpfs mapping) and the emulated device, both
 *       directions, each layout, at 16 KiB, 64 KiB and 1 MiB pages, against one single-threaded
 *       {@code MemorySegment.copy} of the same number of bytes as one contiguous block.
 *   <li>Host index operations (lookup; insert with release) against the same operations on a
 *       {@link ConcurrentHashMap}, which is neither persistent nor off-heap.
 *   <li>Reopen of a warm pool of 100k pages, in this JVM and in a fresh one, against CRC-32C over every page on
 *       one thread: the least work a verifying reopen can do.
 * </ul>
 *
 * Pages are those of Llama-3.1-8B on 8 tensor-parallel ranks (32 layers, one KV head of 128 per rank, bf16:
 * 16 KiB per token), so the three sizes are pages of 1, 4 and 64 tokens. Stateless.
 */
public final class MemorySuite implements BenchSuite {
    static final KvGeometry GEOMETRY =
            KvGeometry.mha(32, 8, 128, KvDtype.BFLOAT16).perRank(8);
    static final int[] PAGE_TOKENS = {1, 4, 64};
    static final int BATCH = 128;
    static final int REOPEN_PAGES = 100_000;
    private static final Namespace NS = Namespace.of("bench/memory", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    @Override
    public String name() {
        return "memory";
    }

    @Override
    public String description() {
        return "scattered host/device page copies vs one contiguous copy; host index ops; warm reopen of 100k pages";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new ArrayList<>();
        Path dir = Files.createTempDirectory(shm(), "hicache-bench-memory");
        try (DeviceRuntime runtime =
                new EmulatedDeviceRuntimeProvider().open(Settings.empty().with("device.memory", "8GiB"))) {
            copies(runtime, dir, quick, rows);
            index(runtime, dir, quick, rows);
            reopen(runtime, dir, quick, rows);
        } finally {
            deleteTree(dir);
        }
        return rows;
    }

    /* ---------------------------------------------------------------- copies */

    private static void copies(DeviceRuntime runtime, Path dir, boolean quick, List<BenchRow> rows) throws Exception {
        Comparison comparison = Comparison.forRun(quick, 2, 6, 150);
        Random random = new Random(7);
        for (HostLayout layout : HostLayout.values()) {
            for (int tokens : PAGE_TOKENS) {
                PageFormat format = new PageFormat(GEOMETRY, tokens, layout);
                long bytes = BATCH * format.pageBytes();
                HostPoolConfig config = new HostPoolConfig(2.0, 0, layout, dir, "copies", 0);
                try (KvPool pool = runtime.createPool(format, 4 * BATCH);
                        HostPagePool host = HostPagePool.open(config, format, 8 * BATCH, runtime);
                        Arena arena = Arena.ofShared()) {
                    MemorySegment from = arena.allocate(bytes, 4096);
                    MemorySegment to = arena.allocate(bytes, 4096);
                    from.fill((byte) 0x5A);
                    int[] devicePages = pick(random, 4 * BATCH);
                    int[] hostSlots = pick(random, 8 * BATCH);
                    Comparison.Workload reference = () -> {
                        MemorySegment.copy(from, 0, to, 0, bytes);
                        return bytes;
                    };
                    Comparison.Workload backup = () -> {
                        awaitCopy(pool.backup(devicePages, host.slab(), hostSlots));
                        return bytes;
                    };
                    Comparison.Workload load = () -> {
                        awaitCopy(pool.load(host.slab(), hostSlots, devicePages));
                        return bytes;
                    };
                    String size = sizeName(format.pageBytes());
                    rows.add(BenchRow.higherIsBetter(
                            "copy_d2h_" + layout + "_" + size,
                            "GB/s",
                            "contiguous_copy_1_thread",
                            comparison.measure(backup, reference),
                            1e-9));
                    rows.add(BenchRow.higherIsBetter(
                            "copy_h2d_" + layout + "_" + size,
                            "GB/s",
                            "contiguous_copy_1_thread",
                            comparison.measure(load, reference),
                            1e-9));
                }
            }
        }
    }

    private static void awaitCopy(KvCopy copy) throws InterruptedException {
        if (!copy.await(Deadline.after(Duration.ofMinutes(1)))) {
            throw new IllegalStateException("a copy took over a minute");
        }
    }

    private static int[] pick(Random random, int limit) {
        List<Integer> all = new ArrayList<>();
        for (int i = 0; i < limit; i++) {
            all.add(i);
        }
        Collections.shuffle(all, random);
        return all.subList(0, BATCH).stream().mapToInt(Integer::intValue).toArray();
    }

    /* ---------------------------------------------------------------- index */

    private static void index(DeviceRuntime runtime, Path dir, boolean quick, List<BenchRow> rows) throws Exception {
        // Tiny pages (64 bytes) so that the page checksum at commit costs next to nothing: this times the index.
        PageFormat tiny = new PageFormat(KvGeometry.mha(1, 1, 16, KvDtype.BFLOAT16), 1, HostLayout.PAGE_FIRST_DIRECT);
        int keys = quick ? 2_000 : 20_000;
        List<StoreKey> present = keys(0, keys);
        List<StoreKey> churn = keys(1, keys);
        HostPoolConfig config = new HostPoolConfig(2.0, 0, HostLayout.PAGE_FIRST_DIRECT, dir, "index", 0);
        Comparison comparison = Comparison.forRun(quick, 2, 6, 200);
        try (HostPagePool pool = HostPagePool.open(config, tiny, 2 * keys + 16, runtime)) {
            ConcurrentHashMap<StoreKey, Integer> map = new ConcurrentHashMap<>();
            for (StoreKey k : present) {
                int slot = insert(pool, k);
                map.put(k, slot);
            }
            Comparison.Workload lookups = () -> {
                long found = 0;
                for (StoreKey k : present) {
                    found += pool.find(k) >= 0 ? 1 : 0;
                }
                requireAll(found, keys);
                return keys;
            };
            Comparison.Workload mapLookups = () -> {
                long found = 0;
                for (StoreKey k : present) {
                    found += map.get(k) != null ? 1 : 0;
                }
                requireAll(found, keys);
                return keys;
            };
            rows.add(BenchRow.higherIsBetter(
                    "host_index_lookup",
                    "ops/s",
                    "concurrent_hash_map_get",
                    comparison.measure(lookups, mapLookups),
                    1));
            int[] slots = new int[keys];
            Comparison.Workload inserts = () -> {
                for (int i = 0; i < keys; i++) {
                    slots[i] = insert(pool, churn.get(i));
                }
                pool.release(slots);
                return keys;
            };
            Comparison.Workload mapInserts = () -> {
                for (int i = 0; i < keys; i++) {
                    map.put(churn.get(i), i);
                }
                for (int i = 0; i < keys; i++) {
                    map.remove(churn.get(i));
                }
                return keys;
            };
            rows.add(BenchRow.higherIsBetter(
                    "host_index_insert_and_release",
                    "ops/s",
                    "concurrent_hash_map_put_remove",
                    comparison.measure(inserts, mapInserts),
                    1));
        }
    }

    private static int insert(HostPagePool pool, StoreKey key) {
        // the pool has room for every key; no message: a measured loop
        int slot = Objects.requireNonNull(pool.tryReserve(1))[0];
        if (!pool.beginWrite(slot, key)) {
            throw new IllegalStateException("key " + key + " is already in the pool");
        }
        pool.commitWrite(slot);
        return slot;
    }

    private static void requireAll(long found, int expected) {
        if (found != expected) {
            throw new IllegalStateException("found " + found + " of " + expected + " keys");
        }
    }

    private static List<StoreKey> keys(int series, int count) {
        List<StoreKey> keys = new ArrayList<>(count);
        Random random = new Random(series);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < count; i++) {
            random.nextBytes(hash);
            keys.add(NS.key(PageHash.fromBytes(hash, 0)));
        }
        return keys;
    }

    /* ---------------------------------------------------------------- reopen */

    private static void reopen(DeviceRuntime runtime, Path dir, boolean quick, List<BenchRow> rows) throws Exception {
        int pages = quick ? 2_000 : REOPEN_PAGES;
        PageFormat format = new PageFormat(GEOMETRY, 1, HostLayout.PAGE_FIRST_DIRECT);
        HostPoolConfig config = new HostPoolConfig(2.0, 0, HostLayout.PAGE_FIRST_DIRECT, dir, "reopen", 0);
        List<StoreKey> keys = keys(2, pages);
        try (HostPagePool pool = HostPagePool.open(config, format, pages, runtime)) {
            for (int i = 0; i < pages; i++) {
                int slot = Checks.checkNotNull(pool.tryReserve(1), "a slot of a pool sized for every key")[0];
                pool.beginWrite(slot, keys.get(i));
                pool.slab().page(slot).fill((byte) (i * 31 + 7));
                pool.commitWrite(slot);
            }
        }
        double[] inProcess = new double[3];
        double[] reference = new double[3];
        for (int rep = 0; rep < inProcess.length; rep++) {
            try (HostPagePool pool = HostPagePool.open(config, format, pages, runtime)) {
                if (pool.openReport().restoredPages() != pages) {
                    throw new IllegalStateException("reopen restored " + pool.openReport());
                }
                inProcess[rep] = pool.openReport().openMillis();
                long start = System.nanoTime();
                int sum = 0;
                for (int s = 0; s < pages; s++) {
                    sum += PageChecksum.of(pool.slab().page(s));
                }
                reference[rep] = (System.nanoTime() - start) / 1e6;
                KeysSuite.sink += sum;
            }
        }
        double crcMillis = Forks.median(reference);
        String what = "reopen_" + pages + "_pages_" + sizeName(format.pageBytes());
        rows.add(BenchRow.lowerIsBetter(
                what + "_same_jvm", Forks.median(inProcess), "ms", "crc32c_every_page_1_thread", crcMillis));
        rows.add(BenchRow.lowerIsBetter(
                what + "_fresh_jvm", reopenInFreshJvm(dir, pages), "ms", "crc32c_every_page_1_thread", crcMillis));
    }

    /** Opens the pool in a new JVM, as a restarted process would, and returns the time its open took. */
    private static double reopenInFreshJvm(Path dir, int pages) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElseThrow());
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of(
                "-cp",
                System.getProperty("java.class.path"),
                Reopen.class.getName(),
                dir.toString(),
                Integer.toString(pages)));
        Process child = new ProcessBuilder(command)
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        String result = null;
        try (BufferedReader out =
                new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = out.readLine()) != null) {
                if (line.startsWith("open-millis ")) {
                    result = line.substring("open-millis ".length());
                }
            }
        }
        if (child.waitFor() != 0 || result == null) {
            throw new IOException("the reopen child failed (exit " + child.exitValue() + ")");
        }
        return Double.parseDouble(result);
    }

    /** The child side of {@link #reopenInFreshJvm}. */
    public static final class Reopen {
        private Reopen() {}

        public static void main(String[] args) throws Exception {
            Path dir = Path.of(args[0]);
            int pages = Integer.parseInt(args[1]);
            PageFormat format = new PageFormat(GEOMETRY, 1, HostLayout.PAGE_FIRST_DIRECT);
            HostPoolConfig config = new HostPoolConfig(2.0, 0, HostLayout.PAGE_FIRST_DIRECT, dir, "reopen", 0);
            try (DeviceRuntime runtime = new EmulatedDeviceRuntimeProvider().open(Settings.empty());
                    HostPagePool pool = HostPagePool.open(config, format, pages, runtime)) {
                if (pool.openReport().restoredPages() != pages) {
                    throw new IllegalStateException("reopen restored " + pool.openReport());
                }
                System.out.println("open-millis " + pool.openReport().openMillis());
            }
        }
    }

    /* ---------------------------------------------------------------- helpers */

    private static String sizeName(long bytes) {
        return bytes >= 1 << 20 ? (bytes >> 20) + "m" : (bytes >> 10) + "k";
    }

    private static Path shm() {
        Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Collections.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
