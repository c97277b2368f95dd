package io.hicache.storage.file;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageRecordDescriptor;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.testkit.PagePattern;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FilePageStoreTest {
    private static final Namespace NS =
            Namespace.of("file-store-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    @TempDir
    Path dir;

    private final Arena arena = Arena.ofShared();

    @AfterEach
    void freeMemory() {
        arena.close();
    }

    @Test
    void reopeningRebuildsTheIndexAndRemovesUnfinishedWrites() throws Exception {
        Path root = dir.resolve("store");
        List<StoreKey> keys = keys(0, 5);
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            assertEquals(5, put(store, keys, 20_000).count(PageStatus.OK));
        }
        // A crash in the middle of a write leaves a temporary file; someone else's file is left alone.
        Path shard;
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            shard = store.fileOf(keys.get(0)).getParent();
        }
        Path leftover = shard.resolve(keys.get(0).hash().toHex() + ".12345-7.tmp");
        Files.write(leftover, new byte[100]);
        Path foreign = shard.resolve("README");
        Files.writeString(foreign, "mine");
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            assertEquals(5, store.openReport().pages());
            assertEquals(1, store.openReport().tempFilesRemoved());
            assertEquals(1, store.openReport().otherFiles());
            assertFalse(Files.exists(leftover));
            assertTrue(Files.exists(foreign));
            assertEquals(5, store.stats().storedPages());
            assertEquals(5, hits(store, keys));
            MemorySegment[] targets = pages(5, 20_000);
            assertEquals(5, get(store, keys, targets).count(PageStatus.OK));
            for (int i = 0; i < 5; i++) {
                assertTrue(PagePattern.matches(targets[i], keys.get(i)));
            }
        }
    }

    @Test
    void aFolderThatHoldsOtherThingsIsRefused() throws IOException {
        Path root = dir.resolve("home");
        Files.createDirectories(root);
        Files.writeString(root.resolve("thesis.tex"), "important");
        var e = assertThrows(HiCacheException.class, () -> FilePageStore.open(FileStoreConfig.at(root)));
        assertEquals(ErrorCode.STORE_UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("empty or new folder"), e.getMessage());
        assertTrue(Files.exists(root.resolve("thesis.tex")));
    }

    @Test
    void aSecondStoreOnTheSameFolderIsRefused() {
        Path root = dir.resolve("store");
        try (FilePageStore first = FilePageStore.open(FileStoreConfig.at(root))) {
            assertEquals(0, first.stats().storedPages());
            var e = assertThrows(HiCacheException.class, () -> FilePageStore.open(FileStoreConfig.at(root)));
            assertEquals(ErrorCode.STORE_UNAVAILABLE, e.code());
            assertTrue(e.getMessage().contains("already open"), e.getMessage());
        }
        FilePageStore.open(FileStoreConfig.at(root)).close(); // free again once closed
    }

    @Test
    void directIoHandlesOddSizesAndUnalignedMemory() {
        try (FilePageStore store =
                FilePageStore.open(FileStoreConfig.at(dir.resolve("store")).withDirectIo(true))) {
            int[] sizes = {1, 4095, 4096, 4097, 5000, 3 * 1024 * 1024 + 17};
            for (int s = 0; s < sizes.length; s++) {
                StoreKey key = key(1, s);
                MemorySegment unaligned = arena.allocate(sizes[s] + 1, 4096).asSlice(1, sizes[s]);
                PagePattern.fill(unaligned, key);
                assertEquals(PageStatus.OK, put(store, List.of(key), unaligned).status(0));
                MemorySegment aligned = arena.allocate(sizes[s], 4096);
                MemorySegment other = arena.allocate(sizes[s] + 3, 4096).asSlice(3, sizes[s]);
                assertEquals(
                        PageStatus.OK,
                        get(store, List.of(key), new MemorySegment[] {aligned}).status(0));
                assertEquals(
                        PageStatus.OK,
                        get(store, List.of(key), new MemorySegment[] {other}).status(0));
                assertTrue(PagePattern.matches(aligned, key), "size " + sizes[s]);
                assertTrue(PagePattern.matches(other, key), "size " + sizes[s]);
            }
        }
    }

    @Test
    void storesWithAndWithoutDirectIoReadEachOthersFiles() {
        Path root = dir.resolve("store");
        List<StoreKey> buffered = keys(2, 3);
        List<StoreKey> direct = keys(3, 3);
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            put(store, buffered, 10_000);
        }
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root).withDirectIo(true))) {
            put(store, direct, 10_000);
            MemorySegment[] targets = pages(3, 10_000);
            assertEquals(3, get(store, buffered, targets).count(PageStatus.OK));
        }
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            MemorySegment[] targets = pages(3, 10_000);
            assertEquals(3, get(store, direct, targets).count(PageStatus.OK));
            for (int i = 0; i < 3; i++) {
                assertTrue(PagePattern.matches(targets[i], direct.get(i)));
            }
        }
    }

    @Test
    void aFileUnderAnotherPagesNameOrWithABadHeaderIsCorruptAndRemoved() throws IOException {
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(dir.resolve("store")))) {
            List<StoreKey> keys = keys(4, 3);
            put(store, keys, 8192);
            // Page 1's file copied over page 0's: right length, right checksum, wrong page.
            Files.copy(store.fileOf(keys.get(1)), store.fileOf(keys.get(0)), StandardCopyOption.REPLACE_EXISTING);
            // Page 2's header damaged in its length field.
            try (FileChannel ch = FileChannel.open(store.fileOf(keys.get(2)), StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(new byte[] {7}), PageRecordDescriptor.PAGE_LENGTH_OFFSET + 1);
            }
            MemorySegment[] targets = pages(3, 8192);
            BatchResult got = get(store, keys, targets);
            assertEquals(PageStatus.CORRUPT, got.status(0), got::toString);
            assertTrue(got.detail(0).orElseThrow().contains("holds page"), got::toString);
            assertEquals(PageStatus.OK, got.status(1));
            assertEquals(PageStatus.CORRUPT, got.status(2), got::toString);
            assertTrue(got.detail(2).orElseThrow().contains("header"), got::toString);
            assertFalse(Files.exists(store.fileOf(keys.get(0))), "a corrupt page is removed so it can be stored again");
            assertEquals(1, hits(store, keys.subList(1, 2)));
            assertEquals(0, hits(store, keys.subList(2, 3)));
            assertEquals(PageStatus.OK, put(store, keys.subList(0, 1), 8192).status(0));
        }
    }

    /**
     * Issue 40, part 4: a page whose file vanished behind the store's back (an operator's cleanup, a disk replaced) is a
     * miss, never FAILED bytes, and its index entry goes with it: the next query says it is not stored, the store's
     * count drops, and the page can be stored again.
     */
    @Test
    void aPageWhoseFileVanishedIsAMissAndLeavesTheIndex() throws IOException {
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(dir.resolve("store")))) {
            List<StoreKey> keys = keys(9, 3);
            put(store, keys, 8192);
            assertEquals(3, store.stats().storedPages());
            Files.delete(store.fileOf(keys.get(1)));
            BatchResult got = get(store, keys, pages(3, 8192));
            assertEquals(PageStatus.OK, got.status(0));
            assertEquals(PageStatus.MISS, got.status(1), got::toString);
            assertEquals(PageStatus.OK, got.status(2));
            assertEquals(2, store.stats().storedPages(), "the entry went with the file");
            assertEquals(1, hits(store, keys), "the prefix ends at the page that vanished");
            assertEquals(PageStatus.OK, put(store, keys.subList(1, 2), 8192).status(0), "stored again");
            assertEquals(3, hits(store, keys));
        }
    }

    /**
     * The key-identity contract's upgrade rule (docs/keys.md): pages a release of key format 1 stored are misses for
     * the same model after the upgrade, never hits, and a format 1 page file put where a current key's file goes is
     * refused by its header (which holds the format 1 namespace id), never served.
     */
    @Test
    void pagesStoredUnderAnOlderKeyFormatAreMissesAfterAnUpgrade() throws IOException {
        Namespace formatOne = NS.toBuilder().formatVersion(1).build();
        List<StoreKey> current = keys(40, 3);
        List<StoreKey> older =
                current.stream().map(k -> formatOne.key(k.hash())).toList();
        Path root = dir.resolve("store");
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            assertEquals(3, put(store, older, 8192).count(PageStatus.OK));
        }
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            assertEquals(3, store.openReport().pages(), "the older pages are still there ...");
            assertEquals(0, hits(store, current), "... but no current key finds them");
            assertEquals(3, get(store, current, pages(3, 8192)).count(PageStatus.MISS));
            assertEquals(3, get(store, older, pages(3, 8192)).count(PageStatus.OK), "their own keys still do");

            Path target = store.fileOf(current.get(0));
            Files.createDirectories(target.getParent());
            Files.copy(store.fileOf(older.get(0)), target);
        }
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(root))) {
            MemorySegment[] targets = pages(1, 8192);
            assertNotEquals(
                    PageStatus.OK, get(store, current.subList(0, 1), targets).status(0));
            assertEquals(0, hits(store, current), "the misnamed file was removed");
        }
    }

    @Test
    void aPageLargerThanTheCapacityIsRejectedAndTheBatchStoresNothing() {
        try (FilePageStore store =
                FilePageStore.open(FileStoreConfig.at(dir.resolve("store")).withCapacityBytes(1 << 20))) {
            List<StoreKey> keys = keys(5, 2);
            MemorySegment small = arena.allocate(4096);
            MemorySegment big = arena.allocate(2 << 20);
            BatchResult r = await(store.put(PageBatch.of(keys, List.of(small, big)), deadline()));
            assertEquals(2, r.count(PageStatus.REJECTED), r::toString);
            assertTrue(r.detail(1).orElseThrow().contains("does not fit"), r::toString);
            assertEquals(0, store.stats().storedPages());
        }
    }

    @Test
    void theDefaultCapacityIsBoundedByTheDisk() throws IOException {
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(dir.resolve("store")))) {
            long usable = Files.getFileStore(dir).getUsableSpace();
            long capacity = store.stats().capacityBytes();
            assertTrue(capacity > 0 && capacity <= usable, capacity + " of " + usable);
        }
    }

    @Test
    void theStoreIsFoundByNameAndConfiguredLikeEveryStore() {
        Settings settings = Settings.builder()
                .flag("file.root", dir.resolve("named").toString())
                .flag("file.capacity", "64MiB")
                .flag("file.io-threads", "2")
                .build();
        try (var store = PageStores.open(new StoreConfig("file", settings))) {
            assertEquals("file", store.name());
            assertEquals(64L << 20, store.stats().capacityBytes());
            assertTrue(store.location().endsWith("named"), store.location());
        }
        Settings bad = Settings.builder()
                .flag("file.root", dir.toString())
                .flag("file.low-water", "2")
                .build();
        var e = assertThrows(HiCacheException.class, () -> PageStores.open(new StoreConfig("file", bad)));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(e.getMessage().contains("file.low-water"), e.getMessage());
    }

    @Test
    void theIndexNeverLetsEvictionTakeAPageBeingRead() {
        FileIndex index = new FileIndex();
        PageId id = PageId.of(key(6, 0));
        index.addFound(id, 100);
        PageUsageIndex<PageId> stored = index.stored();
        long entry = stored.pin(id);
        assertTrue(entry != PageUsageIndex.NO_ENTRY);
        assertEquals(List.of(), stored.claimOldest(100), "a page being read was claimed for eviction");
        stored.unpin(entry);
        assertEquals(
                List.of(id),
                stored.claimOldest(100).stream()
                        .map(PageUsageIndex.Claimed::key)
                        .toList());
        assertEquals(PageUsageIndex.NO_ENTRY, stored.pin(id), "a read started on a page being evicted");
        assertEquals(100, stored.removeEntry(entry));
        assertEquals(-1, stored.removeEntry(entry), "two removers both won");
        assertEquals(0, stored.bytes());
    }

    /**
     * A clear that raced a put removed a shard folder after the put had made (and remembered) it: the store must
     * make it again, not fail every later put of that shard (the daemon's write-behind retried such a page forever).
     */
    @Test
    void aShardFolderRemovedBehindTheStoresBackIsMadeAgain() throws Exception {
        List<StoreKey> keys = keys(9, 2); // one shard: their hashes share the leading bytes
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(dir.resolve("store")))) {
            assertEquals(PageStatus.OK, put(store, keys.subList(0, 1), 4096).status(0));
            Path shard = store.fileOf(keys.get(0)).getParent();
            assertEquals(shard, store.fileOf(keys.get(1)).getParent());
            try (var all = Files.walk(shard.getParent())) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
            assertEquals(PageStatus.OK, put(store, keys.subList(1, 2), 4096).status(0));
            assertEquals(1, hits(store, keys.subList(1, 2)));
        }
    }

    /** Clears of one namespace racing each other (and puts) must not fail: a folder another clear removed is gone. */
    @Test
    void racingClearsOfOneNamespaceAllSucceed() throws Exception {
        try (FilePageStore store = FilePageStore.open(FileStoreConfig.at(dir.resolve("store")))) {
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                for (int round = 0; round < 30; round++) {
                    assertEquals(64, put(store, keys(round, 64), 4096).count(PageStatus.OK));
                    List<Future<?>> clears = new ArrayList<>();
                    for (int i = 0; i < 4; i++) {
                        clears.add(pool.submit(() -> store.clear(NS, deadline()).get(30, TimeUnit.SECONDS)));
                    }
                    for (Future<?> f : clears) {
                        f.get(60, TimeUnit.SECONDS); // throws if a clear failed
                    }
                    assertEquals(0, hits(store, keys(round, 64)));
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    /* ---------------------------------------------------------------- helpers */

    static StoreKey key(int group, int n) {
        return NS.key(PageHash.fromHex(String.format("%08x%08x", group, n) + "0".repeat(47) + "1"));
    }

    private static List<StoreKey> keys(int group, int count) {
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            keys.add(key(group, i));
        }
        return keys;
    }

    private MemorySegment[] pages(int count, int bytes) {
        MemorySegment[] out = new MemorySegment[count];
        for (int i = 0; i < count; i++) {
            out[i] = arena.allocate(bytes, 64);
        }
        return out;
    }

    private BatchResult put(FilePageStore store, List<StoreKey> keys, int bytes) {
        MemorySegment[] pages = pages(keys.size(), bytes);
        for (int i = 0; i < pages.length; i++) {
            PagePattern.fill(pages[i], keys.get(i));
        }
        return await(store.put(PageBatch.of(keys, List.of(pages)), deadline()));
    }

    private static BatchResult put(FilePageStore store, List<StoreKey> keys, MemorySegment page) {
        return await(store.put(PageBatch.of(keys, List.of(page)), deadline()));
    }

    private static BatchResult get(FilePageStore store, List<StoreKey> keys, MemorySegment[] targets) {
        return await(store.get(PageBatch.of(keys, List.of(targets)), deadline()));
    }

    private static int hits(FilePageStore store, List<StoreKey> keys) {
        return await(store.leadingHits(keys, deadline()));
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    private static <T> T await(CompletableFuture<T> f) {
        return f.orTimeout(60, TimeUnit.SECONDS).join();
    }
}
