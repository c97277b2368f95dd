package io.hicache.core.memory.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.ShmDir;
import io.hicache.core.memory.TestPages;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class HostPagePoolTest {
    static final Namespace NS = Namespace.of("host-pool-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    private ShmDir dir;
    private DeviceRuntime runtime;
    private Arena arena;

    @BeforeEach
    void setUp() {
        dir = ShmDir.create("hicache-host-test");
        runtime = new EmulatedDeviceRuntime(64L << 20, 2);
        arena = Arena.ofShared();
    }

    @AfterEach
    void tearDown() {
        arena.close();
        runtime.close();
        dir.close();
    }

    static PageFormat format(HostLayout layout) {
        return new PageFormat(KvGeometry.mha(3, 2, 32, KvDtype.BFLOAT16), 4, layout);
    }

    private HostPagePool open(HostLayout layout, int capacity) {
        return HostPagePool.open(HostPoolConfig.inDir(dir.path(), layout), format(layout), capacity, runtime);
    }

    static StoreKey key(int i) {
        byte[] hash = new byte[PageHash.BYTES];
        hash[0] = (byte) (i >>> 24);
        hash[1] = (byte) (i >>> 16);
        hash[2] = (byte) (i >>> 8);
        hash[3] = (byte) i;
        hash[31] = 7;
        return NS.key(PageHash.fromBytes(hash, 0));
    }

    /** Writes page {@code key} into a fresh slot and commits it; returns the slot. */
    private int store(HostPagePool pool, StoreKey key) {
        int slot = pool.tryReserve(1)[0];
        assertTrue(pool.beginWrite(slot, key));
        MemorySegment flat = arena.allocate(pool.format().pageBytes());
        TestPages.fill(flat, TestPages.seedOf(HostPagePool.indexKey(key)));
        pool.writePage(slot, flat);
        pool.commitWrite(slot);
        return slot;
    }

    private void assertStored(HostPagePool pool, StoreKey key) {
        int slot = pool.pin(key);
        assertTrue(slot >= 0, "page " + key + " is not in the pool");
        try {
            MemorySegment flat = arena.allocate(pool.format().pageBytes());
            pool.readPage(slot, flat);
            assertEquals(-1, TestPages.mismatch(flat, TestPages.seedOf(HostPagePool.indexKey(key))), "bytes of " + key);
        } finally {
            pool.unpin(slot);
        }
    }

    @ParameterizedTest
    @EnumSource(HostLayout.class)
    void pagesWrittenAndCommittedAreFoundAndRead(HostLayout layout) {
        try (HostPagePool pool = open(layout, 32)) {
            assertFalse(pool.openReport().reopened());
            for (int i = 0; i < 10; i++) {
                store(pool, key(i));
            }
            assertEquals(10, pool.readyPages());
            assertEquals(22, pool.freeSlots());
            for (int i = 0; i < 10; i++) {
                assertStored(pool, key(i));
            }
            assertEquals(-1, pool.pin(key(99)));
            assertEquals(
                    10,
                    pool.leadingReady(List.of(
                            key(0), key(1), key(2), key(3), key(4), key(5), key(6), key(7), key(8), key(9), key(10),
                            key(1))));
            assertEquals(0, pool.leadingReady(List.of(key(42), key(1))));
        }
    }

    @Test
    void slotStatesGuardEveryTransition() {
        try (HostPagePool pool = open(HostLayout.PAGE_FIRST_DIRECT, 8)) {
            int[] slots = pool.tryReserve(2);
            MemorySegment flat = arena.allocate(pool.format().pageBytes());
            assertThrows(IllegalStateException.class, () -> pool.commitWrite(slots[0]), "commit of a reserved slot");
            assertThrows(IllegalStateException.class, () -> pool.writePage(slots[0], flat), "write before beginWrite");
            assertTrue(pool.beginWrite(slots[0], key(1)));
            var busy = assertThrows(IllegalStateException.class, () -> pool.release(slots[0]));
            assertTrue(busy.getMessage().contains("being written"), busy.getMessage());
            pool.writePage(slots[0], flat);
            pool.commitWrite(slots[0]);
            assertThrows(
                    IllegalStateException.class, () -> pool.beginWrite(slots[0], key(2)), "rewrite of a ready slot");
            assertThrows(IllegalStateException.class, () -> pool.readPage(slots[0], flat), "read without a pin");
            int pinned = pool.pin(key(1));
            assertEquals(slots[0], pinned);
            var reading = assertThrows(IllegalStateException.class, () -> pool.release(pinned));
            assertTrue(reading.getMessage().contains("being read by 1"), reading.getMessage());
            pool.unpin(pinned);
            assertThrows(IllegalStateException.class, () -> pool.unpin(pinned), "unpin without a pin");
            pool.release(pinned);
            assertEquals(-1, pool.pin(key(1)), "a released page is gone");
            assertThrows(IllegalStateException.class, () -> pool.release(pinned), "double release");
            pool.release(slots[1]);
            assertEquals(8, pool.freeSlots());
            assertNull(pool.tryReserve(9));
        }
    }

    @Test
    void aKeyIsWrittenOnce() {
        try (HostPagePool pool = open(HostLayout.PAGE_FIRST, 8)) {
            store(pool, key(5));
            int slot = pool.tryReserve(1)[0];
            assertFalse(pool.beginWrite(slot, key(5)), "the page is stored already");
            assertTrue(pool.beginWrite(slot, key(6)), "the slot stayed reserved");
            assertFalse(pool.tryReserve(1) == null);
            int other = pool.tryReserve(1)[0];
            assertFalse(pool.beginWrite(other, key(6)), "the page is being written already");
            // Claimed in the index, not committed: not found, not pinned, not counted as ready.
            assertEquals(-1, pool.find(key(6)));
            assertEquals(-1, pool.pin(key(6)));
            assertEquals(1, pool.leadingReady(List.of(key(5), key(6))));
            pool.abortWrite(slot);
            assertTrue(pool.beginWrite(other, key(6)), "an aborted write frees the key");
        }
    }

    @ParameterizedTest
    @EnumSource(HostLayout.class)
    void aCleanReopenServesEveryPage(HostLayout layout) {
        try (HostPagePool pool = open(layout, 64)) {
            for (int i = 0; i < 40; i++) {
                store(pool, key(i));
            }
            pool.release(pool.find(key(3)));
        }
        try (HostPagePool pool = open(layout, 64)) {
            HostPagePool.OpenReport report = pool.openReport();
            assertTrue(report.reopened() && !report.recovered(), report::toString);
            assertEquals(39, report.restoredPages(), report::toString);
            assertEquals(39, pool.readyPages());
            assertEquals(25, pool.freeSlots());
            for (int i = 0; i < 40; i++) {
                if (i == 3) {
                    assertEquals(-1, pool.pin(key(3)));
                } else {
                    assertStored(pool, key(i));
                }
            }
            // A reopened pool keeps working: new pages go into free slots only.
            for (int i = 100; i < 125; i++) {
                store(pool, key(i));
            }
            assertEquals(0, pool.freeSlots());
            for (int i = 0; i < 40; i++) {
                if (i != 3) {
                    assertStored(pool, key(i));
                }
            }
        }
    }

    @Test
    void reopenDropsUnfinishedWritesAndPagesThatNoLongerVerify() {
        int corruptSlot;
        try (HostPagePool pool = open(HostLayout.LAYER_FIRST, 16)) {
            for (int i = 0; i < 6; i++) {
                store(pool, key(i));
            }
            int writing = pool.tryReserve(1)[0];
            assertTrue(pool.beginWrite(writing, key(77)));
            corruptSlot = pool.find(key(2));
            long at = pool.slab().chunkOffset(corruptSlot, 1, 1) + 5;
            MemorySegment memory = pool.slab().memory();
            memory.set(ValueLayout.JAVA_BYTE, at, (byte) ~memory.get(ValueLayout.JAVA_BYTE, at));
        }
        try (HostPagePool pool = open(HostLayout.LAYER_FIRST, 16)) {
            HostPagePool.OpenReport report = pool.openReport();
            assertEquals(5, report.restoredPages(), report::toString);
            assertEquals(1, report.droppedUnfinished(), report::toString);
            assertEquals(1, report.droppedCorrupt(), report::toString);
            assertEquals(-1, pool.pin(key(77)));
            assertEquals(-1, pool.pin(key(2)), "a page that fails its checksum is never served");
            for (int i : new int[] {0, 1, 3, 4, 5}) {
                assertStored(pool, key(i));
            }
            assertEquals(11, pool.freeSlots(), "dropped pages' slots are free again");
        }
    }

    @Test
    void aChangedFormatStartsEmpty() {
        try (HostPagePool pool = open(HostLayout.PAGE_FIRST_DIRECT, 16)) {
            store(pool, key(1));
        }
        try (HostPagePool pool = open(HostLayout.PAGE_FIRST_DIRECT, 20)) {
            assertFalse(pool.openReport().reopened());
            assertEquals(0, pool.readyPages());
            assertEquals(-1, pool.pin(key(1)));
        }
    }

    /** host.keep=false (the README's QuickStart): close deletes the pool's files and the folder it leaves empty. */
    @Test
    void notKeptFilesGoWithThePool() throws Exception {
        Path folder = dir.path().resolve("quick");
        HostPoolConfig notKept = HostPoolConfig.from(Settings.builder()
                .flag("host.dir", folder.toString())
                .flag("host.keep", "false")
                .build());
        assertFalse(notKept.keep());
        PageFormat format = format(HostLayout.PAGE_FIRST_DIRECT);
        try (HostPagePool pool = HostPagePool.open(notKept, format, 16, runtime)) {
            store(pool, key(1));
            assertTrue(Files.exists(folder.resolve("hicache.slab")));
        }
        assertFalse(Files.exists(folder), () -> folder + " is left behind");

        HostPoolConfig kept = HostPoolConfig.from(
                Settings.builder().flag("host.dir", folder.toString()).build());
        assertTrue(kept.keep(), "files are kept by default, for a warm reopen");
        try (HostPagePool pool = HostPagePool.open(kept, format, 16, runtime)) {
            store(pool, key(1));
        }
        try (HostPagePool pool = HostPagePool.open(kept, format, 16, runtime)) {
            assertStored(pool, key(1));
        }
    }

    @Test
    void onlyOneOwnerAtATime() {
        try (HostPagePool pool = open(HostLayout.PAGE_FIRST_DIRECT, 16)) {
            HiCacheException e = assertThrows(HiCacheException.class, () -> open(HostLayout.PAGE_FIRST_DIRECT, 16));
            assertEquals(ErrorCode.HOST_POOL_IN_USE, e.code());
            assertTrue(e.getMessage().contains("host.name"), e.getMessage());
            store(pool, key(1));
        }
        try (HostPagePool again = open(HostLayout.PAGE_FIRST_DIRECT, 16)) {
            assertStored(again, key(1));
        }
    }

    @Test
    void sizingFollowsSGLangAndRefusesWhatDoesNotFit() {
        PageFormat format = format(HostLayout.PAGE_FIRST_DIRECT);
        HostPoolConfig byRatio = HostPoolConfig.inDir(dir.path(), HostLayout.PAGE_FIRST_DIRECT);
        assertEquals(200, HostPoolSizing.slots(byRatio, format, 100));
        HostPoolConfig bySize = HostPoolConfig.from(
                Settings.builder().flag("hicache-size", "0.001").build());
        assertEquals((int) (1e6 / format.pageBytes()), HostPoolSizing.slots(bySize, format, 10));
        HiCacheException smaller =
                assertThrows(HiCacheException.class, () -> HostPoolSizing.slots(bySize, format, 100_000));
        assertTrue(smaller.getMessage().contains("more pages than the device pool"), smaller.getMessage());
        HiCacheException huge =
                assertThrows(HiCacheException.class, () -> HostPoolSizing.checkFits(byRatio, 1L << 50, 0));
        assertEquals(ErrorCode.HOST_POOL_TOO_LARGE, huge.code());
        assertTrue(
                huge.getMessage().contains("1 PiB")
                        && huge.getMessage().contains(dir.path().toString()),
                huge.getMessage());
        HostPoolConfig reserveAll = HostPoolConfig.from(Settings.builder()
                .flag("host.memory-reserve", "1000TiB")
                .flag("host.dir", dir.path().toString())
                .build());
        HiCacheException memory =
                assertThrows(HiCacheException.class, () -> HostPoolSizing.checkFits(reserveAll, 1 << 20, 0));
        assertTrue(memory.getMessage().contains("must stay free"), memory.getMessage());
        HiCacheException ratio = assertThrows(
                HiCacheException.class,
                () -> HostPoolConfig.from(Settings.empty().with("hicache-ratio", "1")));
        assertTrue(ratio.getMessage().contains("above 1"), ratio.getMessage());
        HiCacheException layout = assertThrows(
                HiCacheException.class,
                () -> HostPoolConfig.from(Settings.builder()
                        .environment(Map.of("HICACHE_MEM_LAYOUT", "page_last"))
                        .build()));
        assertTrue(layout.getMessage().contains("hicache-mem-layout"), layout.getMessage());
    }

    @Test
    void manyThreadsWriteReadAndReleaseWithoutMixingPages() throws Exception {
        int threads = 4;
        try (HostPagePool pool = open(HostLayout.PAGE_FIRST, 48)) {
            ExecutorService workers = Executors.newFixedThreadPool(threads);
            try {
                List<Future<Integer>> running = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int seed = t;
                    running.add(workers.submit(() -> {
                        SplittableRandom r = new SplittableRandom(seed);
                        int verified = 0;
                        try (Arena mine = Arena.ofConfined()) {
                            MemorySegment flat = mine.allocate(pool.format().pageBytes());
                            for (int op = 0; op < 400; op++) {
                                StoreKey key = key(r.nextInt(64));
                                int slot = pool.pin(key);
                                if (slot >= 0) {
                                    pool.readPage(slot, flat);
                                    assertEquals(
                                            -1, TestPages.mismatch(flat, TestPages.seedOf(HostPagePool.indexKey(key))));
                                    pool.unpin(slot);
                                    verified++;
                                    if (r.nextInt(4) == 0) {
                                        int victim = pool.find(key);
                                        if (victim >= 0) {
                                            try {
                                                pool.release(victim);
                                            } catch (IllegalStateException raced) {
                                                // another thread released or pinned it first
                                            }
                                        }
                                    }
                                } else {
                                    int[] reserved = pool.tryReserve(1);
                                    if (reserved != null) {
                                        if (pool.beginWrite(reserved[0], key)) {
                                            TestPages.fill(flat, TestPages.seedOf(HostPagePool.indexKey(key)));
                                            pool.writePage(reserved[0], flat);
                                            pool.commitWrite(reserved[0]);
                                        } else {
                                            pool.release(reserved[0]);
                                        }
                                    }
                                }
                            }
                        }
                        return verified;
                    }));
                }
                int verified = 0;
                for (Future<Integer> f : running) {
                    verified += f.get(2, TimeUnit.MINUTES);
                }
                assertTrue(verified > 100, "the threads found too few pages to check anything: " + verified);
            } finally {
                workers.shutdownNow();
            }
            assertEquals(pool.capacity(), pool.freeSlots() + pool.readyPages(), "every slot is free or ready at rest");
        }
    }
}
