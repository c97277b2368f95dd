package io.hicache.storage.nixl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
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
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the NIXL store does beyond the kit: its registration cache, host memory, cleaner and configuration. */
class NixlPageStoreTest {
    private static final Namespace NS =
            Namespace.of("nixl-store-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    private static final int PAGE = 64 * 1024;

    @TempDir
    Path root;

    private final Arena arena = Arena.ofShared();

    @AfterEach
    void freeMemory() {
        arena.close();
    }

    private static StoreKey key(int group, int n) {
        return NS.key(PageHash.fromHex(String.format("%08x%08x", group, n) + "0".repeat(47) + "1"));
    }

    private static Deadline soon() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    private PageBatch pages(int group, int count, MemorySegment slab) {
        List<StoreKey> keys = new ArrayList<>();
        List<MemorySegment> pages = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            StoreKey k = key(group, i);
            MemorySegment p = slab != null ? slab.asSlice((long) i * PAGE, PAGE) : arena.allocate(PAGE, 64);
            PagePattern.fill(p, k);
            keys.add(k);
            pages.add(p);
        }
        return PageBatch.of(keys, pages);
    }

    private PageBatch emptyTargets(PageBatch like) {
        List<MemorySegment> targets = new ArrayList<>();
        for (int i = 0; i < like.size(); i++) {
            targets.add(arena.allocate(PAGE, 64));
        }
        return PageBatch.of(like.keys(), targets);
    }

    @Test
    void aCachedRegistrationIsReusedAndNothingLeaks() {
        try (NixlPageStore store = NixlPageStore.open(NixlStoreConfig.posix(List.of(root)))) {
            PageBatch batch = pages(1, 8, null);
            assertTrue(store.put(batch, soon()).join().allSucceeded());
            int baseline = store.agent().registrationCount();
            for (int round = 0; round < 3; round++) {
                PageBatch targets = emptyTargets(batch);
                assertEquals(8, store.get(targets, soon()).join().count(PageStatus.OK));
                for (int i = 0; i < 8; i++) {
                    assertTrue(PagePattern.matches(targets.page(i), targets.key(i)));
                }
            }
            long[] hitsMisses = store.registrationCacheHitsAndMisses();
            assertEquals(8, hitsMisses[1], "the first round registers each page's file once");
            assertEquals(16, hitsMisses[0], "later rounds reuse them");
            assertEquals(baseline + 8, store.agent().registrationCount(), "only the cached registrations remain");
            assertEquals(0, store.agent().requestCount());
            store.delete(batch.keys(), soon()).join();
            assertEquals(baseline, store.agent().registrationCount(), "a deleted page's registration goes with it");
        }
        try (NixlPageStore store =
                NixlPageStore.open(NixlStoreConfig.posix(List.of(root)).withRegistrationCache(0))) {
            PageBatch batch = pages(2, 4, null);
            store.put(batch, soon()).join();
            store.get(emptyTargets(batch), soon()).join();
            assertEquals(0, store.registrationCacheHitsAndMisses()[0]);
            assertEquals(0, store.agent().registrationCount(), "SGLang's way: every registration released after use");
        }
    }

    @Test
    void pagesInRegisteredHostMemoryNeedNoRegistrationOfTheirOwn() {
        MemorySegment slab = arena.allocate(16L * PAGE, 4096);
        try (NixlPageStore store =
                NixlPageStore.open(NixlStoreConfig.posix(List.of(root)).withRegistrationCache(0))) {
            store.registerHostMemory(slab);
            PageBatch batch = pages(3, 16, slab);
            assertTrue(store.put(batch, soon()).join().allSucceeded());
            slab.fill((byte) 0);
            BatchResult got = store.get(batch, soon()).join();
            assertEquals(16, got.count(PageStatus.OK), got::toString);
            for (int i = 0; i < 16; i++) {
                assertTrue(PagePattern.matches(slab.asSlice((long) i * PAGE, PAGE), batch.key(i)));
            }
            assertEquals(1, store.agent().registrationCount(), "only the host memory stays registered");
        }
    }

    @Test
    void theCleanerDeletesTheOldestPagesPastTheHighWaterMark() throws Exception {
        long capacity = 40L * (PAGE + PageTrailer.BYTES);
        NixlStoreConfig config = new NixlStoreConfig(
                "POSIX", List.of(root.resolve("x"), root.resolve("y")), false, 4, capacity, 0.8, 0.5, 64, Map.of());
        try (NixlPageStore store = NixlPageStore.open(config)) {
            for (int group = 0; group < 5; group++) {
                assertTrue(store.put(pages(10 + group, 8, null), soon()).join().allSucceeded());
                Thread.sleep(20); // distinct last-use times per group
            }
            // 40 pages reach 100%: past 80% the cleaner removes the oldest down to 50%.
            long until = System.nanoTime() + 10_000_000_000L;
            while (store.stats().storedBytes() > 0.8 * capacity && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertTrue(
                    store.stats().storedBytes() <= 0.8 * capacity,
                    "still " + store.stats().storedBytes());
            assertEquals(0, store.leadingHits(pages(10, 8, null).keys(), soon()).join(), "the oldest group is gone");
            assertEquals(8, store.leadingHits(pages(14, 8, null).keys(), soon()).join(), "the newest group stays");
        }
    }

    @Test
    void openingRemovesTheTemporaryFilesOfDeadWritesOnly() throws Exception {
        Path dir = root.resolve("ns/abc");
        Files.createDirectories(dir);
        Path dead = Files.writeString(dir.resolve(".abc.page.1234.tmp"), "half a page");
        Files.setLastModifiedTime(
                dead,
                FileTime.fromMillis(
                        System.currentTimeMillis() - Duration.ofHours(1).toMillis()));
        Path live = Files.writeString(dir.resolve(".abd.page.5678.tmp"), "being written by another store");
        try (NixlPageStore store = NixlPageStore.open(NixlStoreConfig.posix(List.of(root)))) {
            assertEquals(0, store.stats().storedPages());
        }
        assertTrue(Files.notExists(dead), "an hour-old temporary file is removed");
        assertTrue(Files.exists(live), "a fresh one may belong to a write in progress elsewhere");
    }

    @Test
    void itIsFoundByNameAndItsConfigurationIsChecked() {
        Settings settings = Settings.builder()
                .flag("nixl.dirs", root.resolve("p") + "," + root.resolve("q"))
                .flag("nixl.plugin", "POSIX")
                .build();
        try (var store = PageStores.open(new StoreConfig("nixl", settings))) {
            assertEquals("nixl", store.name());
            assertTrue(store.location().startsWith("POSIX"), store.location());
        }
        assertTrue(Files.isDirectory(root.resolve("q")));
        HiCacheException unknown = assertThrows(
                HiCacheException.class,
                () -> NixlPageStore.open(
                        new NixlStoreConfig("GDS", List.of(root), false, 1, 0, 0.8, 0.7, 0, Map.of())));
        assertTrue(unknown.getMessage().contains("no NIXL plugin named 'GDS'"), unknown.getMessage());
        assertThrows(
                HiCacheException.class,
                () -> NixlStoreConfig.from(Settings.builder()
                        .flag("nixl.low-water", "0.9")
                        .flag("nixl.high-water", "0.5")
                        .build()));
        HiCacheException noBucket =
                assertThrows(HiCacheException.class, () -> NixlPageStore.open(NixlStoreConfig.obj(Map.of())));
        assertTrue(
                noBucket.getMessage().contains("no bucket") || System.getenv("AWS_DEFAULT_BUCKET") != null,
                noBucket.getMessage());
    }
}
