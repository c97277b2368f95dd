package io.hicache.storage.rocksdb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.testkit.PagePattern;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RocksDbPageStoreTest {
    private static final Namespace NS =
            Namespace.of("rocksdb-store-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    /** A key of page {@code n} in group {@code group}. */
    private static StoreKey key(int group, int n) {
        return NS.key(PageHash.fromHex(String.format("%08x%08x", group, n) + "0".repeat(47) + "1"));
    }

    @TempDir
    Path dir;

    @Test
    void closeReleasesEveryNativeHandleOnceAndFreesTheFolder() {
        Path root = dir.resolve("store");
        RocksDbPageStore store = RocksDbPageStore.open(RocksDbStoreConfig.at(root));
        assertTrue(store.openHandles() >= 8, "handles: " + store.openHandles());
        store.close();
        assertEquals(0, store.openHandles());
        store.close(); // a second close does nothing
        assertEquals(0, store.openHandles());
        RocksDbPageStore.open(RocksDbStoreConfig.at(root)).close(); // the database's own lock was released too
    }

    @Test
    void aSecondStoreOnTheSameFolderIsRefused() {
        Path root = dir.resolve("store");
        try (RocksDbPageStore first = RocksDbPageStore.open(RocksDbStoreConfig.at(root))) {
            assertEquals(0, first.stats().storedPages());
            var e = Assertions.assertThrows(
                    HiCacheException.class, () -> RocksDbPageStore.open(RocksDbStoreConfig.at(root)));
            assertEquals(ErrorCode.STORE_UNAVAILABLE, e.code());
            assertTrue(e.getMessage().contains("already open"), e.getMessage());
        }
    }

    @Test
    void oldestPagesGoFirstAndTheIndexSurvivesAReopen() throws Exception {
        Path root = dir.resolve("store");
        int pageBytes = 64 * 1024;
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            keys.add(key(9, i));
        }
        try (Arena arena = Arena.ofShared()) {
            try (RocksDbPageStore store =
                    RocksDbPageStore.open(RocksDbStoreConfig.at(root).withCapacityBytes(32L * pageBytes))) {
                for (int i = 0; i < keys.size(); i += 8) {
                    List<StoreKey> batch = keys.subList(i, i + 8);
                    BatchResult r = put(store, batch, arena, pageBytes);
                    assertEquals(8, r.count(PageStatus.OK), r::toString);
                    assertTrue(store.stats().storedBytes() <= 40L * pageBytes, store.stats()::toString);
                }
                waitUntil(() -> store.stats().storedBytes() <= 32L * pageBytes);
                assertEquals(0, hits(store, keys.subList(0, 1)), "the oldest page is still there");
                assertEquals(8, hits(store, keys.subList(56, 64)), "the newest pages are gone");
            }
            try (RocksDbPageStore store =
                    RocksDbPageStore.open(RocksDbStoreConfig.at(root).withCapacityBytes(32L * pageBytes))) {
                assertEquals(8, hits(store, keys.subList(56, 64)));
                MemorySegment target = arena.allocate(pageBytes);
                BatchResult got = await(store.get(PageBatch.of(keys.subList(63, 64), List.of(target)), deadline()));
                assertEquals(PageStatus.OK, got.status(0));
                assertTrue(PagePattern.matches(target, keys.get(63)));
            }
        }
    }

    @Test
    void theStoreIsFoundByNameAndConfiguredLikeEveryStore() {
        Settings settings = Settings.builder()
                .flag("rocksdb.root", dir.resolve("named").toString())
                .flag("rocksdb.capacity", "64MiB")
                .build();
        try (var store = PageStores.open(new StoreConfig("rocksdb", settings))) {
            assertEquals("rocksdb", store.name());
            assertEquals(64L << 20, store.stats().capacityBytes());
        }
        assertTrue(Files.isDirectory(dir.resolve("named").resolve("db")));
    }

    private static BatchResult put(RocksDbPageStore store, List<StoreKey> keys, Arena arena, int bytes) {
        List<MemorySegment> pages = new ArrayList<>();
        for (StoreKey k : keys) {
            MemorySegment p = arena.allocate(bytes);
            PagePattern.fill(p, k);
            pages.add(p);
        }
        return await(store.put(PageBatch.of(keys, pages), deadline()));
    }

    private static int hits(RocksDbPageStore store, List<StoreKey> keys) {
        return await(store.leadingHits(keys, deadline()));
    }

    private static void waitUntil(BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out");
            Thread.sleep(10);
        }
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    private static <T> T await(CompletableFuture<T> f) {
        return f.orTimeout(60, TimeUnit.SECONDS).join();
    }

    @Test
    void aLargeBatchIsWrittenOnceToABlobFileAndASmallOneThroughTheLog() throws Exception {
        Path root = dir.resolve("store");
        RocksDbStoreConfig config = new RocksDbStoreConfig(root, 0, 0.9, false, false, 64L << 20, 4096, 1L << 20, 2);
        try (RocksDbPageStore store = RocksDbPageStore.open(config);
                Arena arena = Arena.ofShared()) {
            Path db = root.resolve("db");
            // 64 KiB: under a quarter of the 1 MiB memtable, through the log, no blob file yet.
            put(store, arena, 0, 1, 64 << 10);
            assertEquals(0, bytes(db, ".blob"), "a small put waits in the memtable, logged");
            long logged = bytes(db, ".log");
            assertTrue(logged >= 64 << 10, "the small put is in the log: " + logged);
            // 4 x 256 KiB: a quarter of the memtable or more, flushed before the put returns, not logged.
            put(store, arena, 1, 4, 256 << 10);
            assertTrue(bytes(db, ".blob") >= 4 * (256 << 10), "the large put is in a blob file when it returns");
            assertTrue(bytes(db, ".log") < logged + (256 << 10), "and its bytes did not go through the log");
            // Both read back whole.
            for (int[] g : new int[][] {{0, 1, 64 << 10}, {1, 4, 256 << 10}}) {
                List<StoreKey> keys = new ArrayList<>();
                List<MemorySegment> targets = new ArrayList<>();
                for (int i = 0; i < g[1]; i++) {
                    keys.add(key(g[0], i));
                    targets.add(arena.allocate(g[2]));
                }
                BatchResult r = store.get(PageBatch.of(keys, targets), Deadline.after(Duration.ofSeconds(30)))
                        .join();
                assertEquals(g[1], r.count(PageStatus.OK), r::toString);
                for (int i = 0; i < g[1]; i++) {
                    assertEquals(-1, PagePattern.firstMismatch(targets.get(i), keys.get(i), 0));
                }
            }
        }
    }

    private static void put(RocksDbPageStore store, Arena arena, int group, int pages, int pageBytes) {
        List<StoreKey> keys = new ArrayList<>();
        List<MemorySegment> sources = new ArrayList<>();
        for (int i = 0; i < pages; i++) {
            MemorySegment page = arena.allocate(pageBytes);
            PagePattern.fill(page, key(group, i));
            keys.add(key(group, i));
            sources.add(page);
        }
        BatchResult r = store.put(PageBatch.of(keys, sources), Deadline.after(Duration.ofSeconds(30)))
                .join();
        assertEquals(pages, r.count(PageStatus.OK), r::toString);
    }

    /** Bytes of the database's files whose names end in {@code suffix}. */
    private static long bytes(Path db, String suffix) throws IOException {
        try (var files = Files.list(db)) {
            long sum = 0;
            for (Path f : files.filter(f -> f.getFileName().toString().endsWith(suffix))
                    .toList()) {
                sum += Files.size(f);
            }
            return sum;
        }
    }
}
