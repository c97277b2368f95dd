package io.hicache.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DeviceInfo;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.memory.WaitMode;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The device runtime conformance kit: the emulated runtime runs it here, the CUDA runtime on a GPU. A runtime's
 * test extends this class and implements {@link #openRuntime()}.
 *
 * <p>Every page is filled with a pattern derived from its index and side (never zeros), every byte is checked
 * after each copy, and pages that a copy must not touch are checked too. Each copy case runs for three
 * geometries (MHA bf16, MLA, MHA fp8 with one-token pages) and the three host layouts.
 *
 * <p>JUnit makes one instance per case. The kit owns the runtime it opens and the host memory it allocates,
 * and releases both when the case ends.
 */
@TestMethodOrder(MethodOrderer.MethodName.class)
public abstract class DeviceRuntimeConformanceKit {
    private static final int DEVICE_PAGES = 48;
    private static final int HOST_SLOTS = 64;
    private static final long DEVICE_SIDE = 1L << 40;
    private static final long HOST_SIDE = 2L << 40;

    /** The runtime under test; opened before each case, closed after it. */
    protected DeviceRuntime runtime;

    private Arena arena;
    private final List<HostRegistration> registrations = new ArrayList<>();
    private SplittableRandom random;

    /** Opens the runtime under test. */
    protected abstract DeviceRuntime openRuntime() throws Exception;

    /** How long a copy may take before the case fails. */
    protected Duration copyTimeout() {
        return Duration.ofSeconds(60);
    }

    @BeforeEach
    final void open() throws Exception {
        arena = Arena.ofShared();
        random = new SplittableRandom(System.nanoTime());
        runtime = openRuntime();
    }

    @AfterEach
    final void close() {
        try {
            registrations.forEach(HostRegistration::close);
            if (runtime != null) {
                runtime.close();
            }
        } finally {
            arena.close();
        }
    }

    /** The geometries and layouts every copy case runs with. */
    static Stream<Arguments> formats() {
        List<Arguments> all = new ArrayList<>();
        for (HostLayout layout : HostLayout.values()) {
            all.add(Arguments.of("mha-bf16-p4", new PageFormat(KvGeometry.mha(4, 2, 64, KvDtype.BFLOAT16), 4, layout)));
            all.add(Arguments.of("mla-p2", new PageFormat(KvGeometry.mla(3, 32, 8, KvDtype.BFLOAT16), 2, layout)));
            all.add(Arguments.of("mha-fp8-p1", new PageFormat(KvGeometry.mha(5, 1, 32, KvDtype.FP8_E4M3), 1, layout)));
        }
        return all.stream();
    }

    /* ---------------------------------------------------------------- device and allocator */

    @Test
    void infoDescribesTheDeviceAndItsMemory() {
        DeviceInfo before = runtime.info();
        assertTrue(!before.name().isBlank() && !before.runtime().isBlank(), before::toString);
        assertEquals(runtime.name(), before.runtime());
        assertTrue(before.totalBytes() > 0 && before.freeBytes() <= before.totalBytes(), before::toString);
        PageFormat format = new PageFormat(KvGeometry.mha(4, 2, 64, KvDtype.BFLOAT16), 16, HostLayout.PAGE_FIRST);
        try (KvPool pool = runtime.createPool(format, 256)) {
            assertEquals(256L * format.pageBytes(), pool.bytes());
            assertTrue(
                    runtime.info().freeBytes() <= before.freeBytes() - pool.bytes() / 2,
                    "free memory did not shrink by the pool: " + before + " -> " + runtime.info());
        }
    }

    @Test
    void aPoolThatDoesNotFitIsRefusedWithTheSizes() {
        PageFormat format = new PageFormat(KvGeometry.mha(8, 8, 128, KvDtype.BFLOAT16), 64, HostLayout.PAGE_FIRST);
        long free = runtime.info().freeBytes();
        int pages = (int) Math.min(Integer.MAX_VALUE, free / format.pageBytes() + 16);
        HiCacheException e = assertThrows(HiCacheException.class, () -> runtime.createPool(format, pages));
        assertEquals(ErrorCode.DEVICE_OUT_OF_MEMORY, e.code(), e::toString);
        assertTrue(String.valueOf(e.getMessage()).contains(Integer.toString(pages)), e.getMessage());
    }

    @Test
    void theAllocatorAccountsForEveryPage() {
        PageFormat format = formatFor(HostLayout.PAGE_FIRST);
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            PageAllocator allocator = pool.allocator();
            assertEquals(DEVICE_PAGES, allocator.capacity());
            assertEquals(DEVICE_PAGES, allocator.available());
            int[] a = allocator.allocate(10);
            int[] b = allocator.allocate(DEVICE_PAGES - 10);
            assertEquals(0, allocator.available());
            List<Integer> all = new ArrayList<>();
            for (int p : a) {
                all.add(p);
            }
            for (int p : b) {
                all.add(p);
            }
            Collections.sort(all);
            for (int i = 0; i < DEVICE_PAGES; i++) {
                assertEquals(i, all.get(i), "every page handed out once");
            }
            assertNull(allocator.tryAllocate(1), "an exhausted allocator hands out nothing");
            HiCacheException exhausted = assertThrows(HiCacheException.class, () -> allocator.allocate(3));
            assertEquals(ErrorCode.PAGES_EXHAUSTED, exhausted.code());
            assertTrue(
                    String.valueOf(exhausted.getMessage()).contains("asked for 3 pages, 0 of " + DEVICE_PAGES),
                    exhausted.getMessage());
            allocator.free(a);
            assertEquals(10, allocator.available());
            var doubleFree = assertThrows(IllegalStateException.class, () -> allocator.free(a[0]));
            assertTrue(String.valueOf(doubleFree.getMessage()).contains("double free"), doubleFree.getMessage());
            assertThrows(IllegalStateException.class, () -> allocator.free(b[0], b[0]));
            assertThrows(IllegalArgumentException.class, () -> allocator.free(DEVICE_PAGES));
            assertEquals(10, allocator.available(), "a refused free changes nothing");
            allocator.free(b);
            assertEquals(DEVICE_PAGES, allocator.available());
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("formats")
    void pagesWrittenAndReadBackAreIdentical(String name, PageFormat format) {
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            fillDevice(pool, range(DEVICE_PAGES));
            for (int page = 0; page < DEVICE_PAGES; page++) {
                assertDevicePage(
                        pool, page, DEVICE_SIDE + page, format.geometry().layers());
            }
        }
    }

    /* ---------------------------------------------------------------- copies */

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("formats")
    void backupCopiesScatteredDevicePagesToScatteredHostSlots(String name, PageFormat format) throws Exception {
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            HostSlab host = newSlab(format, HOST_SLOTS);
            fillDevice(pool, range(DEVICE_PAGES));
            fillHostSentinel(host);
            int[] devicePages = pick(DEVICE_PAGES, 20);
            int[] hostSlots = pick(HOST_SLOTS, 20);
            KvCopy copy = pool.backup(devicePages, host, hostSlots);
            assertTrue(copy.await(Deadline.after(copyTimeout())), "backup did not finish in time");
            for (int i = 0; i < devicePages.length; i++) {
                assertHostPage(host, hostSlots[i], DEVICE_SIDE + devicePages[i]);
            }
            assertUntouchedHostSlots(host, hostSlots);
            for (int layer = 0; layer < copy.layers(); layer++) {
                assertTrue(copy.layerDone(layer).isDone(), "a finished backup has every layer done");
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("formats")
    void loadCopiesScatteredHostSlotsToScatteredDevicePages(String name, PageFormat format) throws Exception {
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            HostSlab host = newSlab(format, HOST_SLOTS);
            fillDevice(pool, range(DEVICE_PAGES));
            fillHost(host, range(HOST_SLOTS));
            int[] hostSlots = pick(HOST_SLOTS, 24);
            int[] devicePages = pick(DEVICE_PAGES, 24);
            KvCopy copy = pool.load(host, hostSlots, devicePages);
            assertTrue(copy.await(Deadline.after(copyTimeout())), "load did not finish in time");
            boolean[] loaded = new boolean[DEVICE_PAGES];
            for (int i = 0; i < devicePages.length; i++) {
                loaded[devicePages[i]] = true;
                assertDevicePage(
                        pool,
                        devicePages[i],
                        HOST_SIDE + hostSlots[i],
                        format.geometry().layers());
            }
            for (int page = 0; page < DEVICE_PAGES; page++) {
                if (!loaded[page]) {
                    assertDevicePage(
                            pool, page, DEVICE_SIDE + page, format.geometry().layers());
                }
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("formats")
    void loadSignalsLayersInOrderAndEachLayerHasLandedWhenSignalled(String name, PageFormat format) throws Exception {
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            FilledLoad load = fillForLoad(pool);
            HostSlab host = load.host();
            int[] hostSlots = load.hostSlots();
            int[] devicePages = load.devicePages();
            int layers = format.geometry().layers();
            ConcurrentLinkedQueue<Integer> order = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
            KvCopy copy = pool.load(host, hostSlots, devicePages);
            assertEquals(layers, copy.layers());
            for (int layer = 0; layer < layers; layer++) {
                int l = layer;
                copy.layerDone(layer).thenRun(() -> {
                    order.add(l);
                    for (int earlier = 0; earlier < l; earlier++) {
                        if (!copy.layerDone(earlier).isDone()) {
                            problems.add("layer " + l + " signalled before layer " + earlier);
                        }
                    }
                    // The bytes of every signalled layer must be on the device already.
                    int probe = l % devicePages.length;
                    String bad = devicePageProblem(pool, devicePages[probe], HOST_SIDE + hostSlots[probe], l + 1);
                    if (bad != null) {
                        problems.add("layer " + l + " signalled before its bytes landed: " + bad);
                    }
                });
            }
            assertTrue(copy.await(Deadline.after(copyTimeout())), "load did not finish in time");
            for (int layer = 0; layer < layers; layer++) {
                assertTrue(copy.awaitLayer(layer, Deadline.expired()), "a finished load has every layer done");
            }
            assertEquals(List.of(), List.copyOf(problems));
            List<Integer> expected = new ArrayList<>();
            for (int l = 0; l < layers; l++) {
                expected.add(l);
            }
            assertEquals(expected, List.copyOf(order), "layers complete in order");
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("formats")
    void layerRangeCopiesMoveOnlyTheirLayersAndSignalEachInOrder(String name, PageFormat format) throws Exception {
        int layers = format.geometry().layers();
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            HostSlab host = newSlab(format, HOST_SLOTS);
            fillDevice(pool, range(DEVICE_PAGES));
            fillHost(host, range(HOST_SLOTS));
            int[] devicePages = pick(DEVICE_PAGES, 12);
            int[] hostSlots = pick(HOST_SLOTS, 12);
            // A staged handoff's gather: every layer but the first, each signalled with its bytes on the host.
            ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
            KvCopy gather = pool.backupLayers(devicePages, host, hostSlots, 1, layers - 1);
            assertEquals(layers - 1, gather.layers());
            List<CompletableFuture<Void>> checks = new ArrayList<>();
            for (int j = 0; j < layers - 1; j++) {
                int l = j;
                checks.add(gather.layerDone(j).thenRun(() -> {
                    for (int earlier = 0; earlier < l; earlier++) {
                        if (!gather.layerDone(earlier).isDone()) {
                            problems.add("gathered layer " + (l + 1) + " signalled before layer " + (earlier + 1));
                        }
                    }
                    for (int i = 0; i < devicePages.length; i++) {
                        String bad = hostLayerProblem(host, hostSlots[i], DEVICE_SIDE + devicePages[i], l + 1);
                        if (bad != null) {
                            problems.add("gathered layer " + (l + 1) + " signalled before its bytes landed: " + bad);
                        }
                    }
                }));
            }
            assertTrue(gather.await(Deadline.after(copyTimeout())), "gather did not finish in time");
            CompletableFuture.allOf(checks.toArray(CompletableFuture[]::new))
                    .get(copyTimeout().toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(List.of(), List.copyOf(problems));
            for (int i = 0; i < devicePages.length; i++) {
                assertNull(
                        hostLayerProblem(host, hostSlots[i], HOST_SIDE + hostSlots[i], 0), "layer 0 was not asked for");
                for (int layer = 1; layer < layers; layer++) {
                    assertNull(hostLayerProblem(host, hostSlots[i], DEVICE_SIDE + devicePages[i], layer));
                }
            }
            // A staged handoff's scatter: one layer as it arrives; the device's other layers keep their bytes.
            int[] loadSlots = pick(HOST_SLOTS, 12);
            int last = layers - 1;
            KvCopy scatter = pool.loadLayers(host, loadSlots, devicePages, last, 1);
            assertEquals(1, scatter.layers());
            assertTrue(scatter.awaitLayer(0, Deadline.after(copyTimeout())), "scatter did not finish in time");
            assertTrue(scatter.done().isDone());
            for (int i = 0; i < devicePages.length; i++) {
                MemorySegment flat = arena.allocate(format.pageBytes());
                pool.readPage(devicePages[i], flat);
                for (int layer = 0; layer < layers; layer++) {
                    long seed = layer == last
                            ? gatheredSeed(hostSlots, devicePages, loadSlots[i])
                            : DEVICE_SIDE + devicePages[i];
                    assertNull(
                            PagePattern.layerMismatch(format, flat, seed, layer),
                            "device page " + devicePages[i] + " layer " + layer);
                }
            }
            assertThrows(IllegalArgumentException.class, () -> pool.loadLayers(host, loadSlots, devicePages, last, 2));
            assertThrows(IllegalArgumentException.class, () -> pool.backupLayers(devicePages, host, hostSlots, 0, 0));
            assertThrows(IllegalArgumentException.class, () -> pool.backupLayers(devicePages, host, hostSlots, -1, 1));
        }
    }

    /** What a host slot holds in the layers the gather above copied: its device page's bytes, or its own. */
    private static long gatheredSeed(int[] gatheredSlots, int[] gatheredPages, int slot) {
        for (int i = 0; i < gatheredSlots.length; i++) {
            if (gatheredSlots[i] == slot) {
                return DEVICE_SIDE + gatheredPages[i];
            }
        }
        return HOST_SIDE + slot;
    }

    private @Nullable String hostLayerProblem(HostSlab host, int slot, long seed, int layer) {
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment flat = scratch.allocate(host.format().pageBytes());
            host.readPage(slot, flat);
            String bad = PagePattern.layerMismatch(host.format(), flat, seed, layer);
            return bad == null ? null : "host slot " + slot + ": " + bad;
        }
    }

    /** A host slab and a pool filled with their patterns, and a random load between them. */
    private record FilledLoad(HostSlab host, int[] hostSlots, int[] devicePages) {}

    private FilledLoad fillForLoad(KvPool pool) {
        HostSlab host = newSlab(pool.format(), HOST_SLOTS);
        fillHost(host, range(HOST_SLOTS));
        fillDevice(pool, range(DEVICE_PAGES));
        return new FilledLoad(host, pick(HOST_SLOTS, DEVICE_PAGES), pick(DEVICE_PAGES, DEVICE_PAGES));
    }

    @Test
    void aSpinningWaiterSeesEachLayerWithItsBytes() throws Exception {
        PageFormat format = formatFor(HostLayout.PAGE_FIRST_DIRECT);
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            FilledLoad load = fillForLoad(pool);
            int[] hostSlots = load.hostSlots();
            int[] devicePages = load.devicePages();
            KvCopy copy = pool.load(load.host(), hostSlots, devicePages);
            Deadline deadline = Deadline.after(copyTimeout());
            for (int layer = 0; layer < format.geometry().layers(); layer++) {
                assertTrue(copy.awaitLayer(layer, deadline, WaitMode.SPIN), "layer " + layer + " did not land in time");
                int probe = layer % devicePages.length;
                String bad = devicePageProblem(pool, devicePages[probe], HOST_SIDE + hostSlots[probe], layer + 1);
                assertNull(bad, () -> "a spinning wait for layer returned before its bytes landed: " + bad);
            }
            assertTrue(copy.await(Deadline.expired(), WaitMode.SPIN), "a finished load is done");
        }
    }

    @Test
    void copiesOfDisjointPagesRunConcurrentlyFromManyThreads() throws Exception {
        PageFormat format = formatFor(HostLayout.PAGE_FIRST_DIRECT);
        int threads = 4;
        int perThread = DEVICE_PAGES / threads;
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            HostSlab host = newSlab(format, HOST_SLOTS);
            fillDevice(pool, range(DEVICE_PAGES));
            fillHost(host, range(HOST_SLOTS));
            ExecutorService workers = Executors.newFixedThreadPool(threads);
            try {
                List<Future<?>> running = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int[] mineDevice = new int[perThread];
                    int[] mineHost = new int[perThread];
                    for (int i = 0; i < perThread; i++) {
                        mineDevice[i] = t * perThread + i;
                        mineHost[i] = t * perThread + i;
                    }
                    running.add(workers.submit(() -> {
                        for (int round = 0; round < 6; round++) {
                            // Load host pages in, then back them up to other host slots of this thread's own.
                            KvCopy in = pool.load(host, mineHost, mineDevice);
                            assertTrue(in.await(Deadline.after(copyTimeout())));
                            for (int i = 0; i < perThread; i++) {
                                assertDevicePage(
                                        pool,
                                        mineDevice[i],
                                        HOST_SIDE + mineHost[i],
                                        format.geometry().layers());
                            }
                            KvCopy out = pool.backup(mineDevice, host, mineHost);
                            assertTrue(out.await(Deadline.after(copyTimeout())));
                            for (int i = 0; i < perThread; i++) {
                                assertHostPage(host, mineHost[i], HOST_SIDE + mineHost[i]);
                            }
                        }
                        return null;
                    }));
                }
                for (Future<?> f : running) {
                    try {
                        f.get(5, TimeUnit.MINUTES);
                    } catch (ExecutionException e) {
                        if (e.getCause() instanceof AssertionError a) {
                            throw a;
                        }
                        throw e;
                    }
                }
            } finally {
                workers.shutdownNow();
            }
        }
    }

    @Test
    void badCopiesAreRejectedBeforeAnyByteMoves() throws Exception {
        PageFormat format = formatFor(HostLayout.LAYER_FIRST);
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            HostSlab host = newSlab(format, HOST_SLOTS);
            fillHostSentinel(host);
            var range = assertThrows(
                    IllegalArgumentException.class,
                    () -> pool.backup(new int[] {0, DEVICE_PAGES}, host, new int[] {1, 2}));
            assertTrue(
                    String.valueOf(range.getMessage())
                            .contains("devicePages[1] = " + DEVICE_PAGES + " is out of range"),
                    range.getMessage());
            assertThrows(IllegalArgumentException.class, () -> pool.backup(new int[] {0}, host, new int[] {-1}));
            assertThrows(IllegalArgumentException.class, () -> pool.load(host, new int[] {HOST_SLOTS}, new int[] {0}));
            var lengths = assertThrows(
                    IllegalArgumentException.class, () -> pool.load(host, new int[] {1, 2}, new int[] {1}));
            assertTrue(
                    String.valueOf(lengths.getMessage()).contains("2 hostSlots, 1 devicePages"), lengths.getMessage());
            var twice = assertThrows(
                    IllegalArgumentException.class, () -> pool.backup(new int[] {3, 4}, host, new int[] {7, 7}));
            assertTrue(String.valueOf(twice.getMessage()).contains("named twice"), twice.getMessage());
            HostSlab other =
                    newSlab(new PageFormat(KvGeometry.mha(4, 2, 64, KvDtype.BFLOAT16), 8, HostLayout.LAYER_FIRST), 4);
            assertThrows(IllegalArgumentException.class, () -> pool.load(other, new int[] {0}, new int[] {0}));
            assertThrows(
                    IllegalArgumentException.class,
                    () -> pool.readPage(DEVICE_PAGES, arena.allocate(format.pageBytes())));
            assertUntouchedHostSlots(host, new int[0]);
            KvCopy empty = pool.load(host, new int[0], new int[0]);
            assertTrue(empty.await(Deadline.after(copyTimeout())), "an empty copy completes");
        }
    }

    @Test
    void aClosedPoolRefusesWork() {
        PageFormat format = formatFor(HostLayout.PAGE_FIRST);
        KvPool pool = runtime.createPool(format, DEVICE_PAGES);
        HostSlab host = newSlab(format, HOST_SLOTS);
        pool.close();
        pool.close();
        assertThrows(IllegalStateException.class, () -> pool.backup(new int[] {0}, host, new int[] {0}));
        assertThrows(IllegalStateException.class, () -> pool.readPage(0, arena.allocate(format.pageBytes())));
    }

    /* ---------------------------------------------------------------- engines' view: buffers and adopted memory */

    @ParameterizedTest
    @MethodSource("formats")
    void deviceBuffersSayWhereEachLayersRowsAre(String name, PageFormat format) {
        try (KvPool pool = runtime.createPool(format, DEVICE_PAGES)) {
            DeviceBuffers b = pool.buffers();
            assertEquals(runtime.name(), b.runtime());
            assertEquals(format.geometry().layers(), b.layers().size());
            assertEquals(DEVICE_PAGES, b.pages());
            assertEquals(format.pageSizeTokens(), b.pageSizeTokens());
            assertEquals(format.geometry().dtype(), b.dtype());
            assertEquals(format.rowBytes(), b.rowBytes());
            long base = b.layers().getFirst().keyAddress();
            int parts = format.geometry().attention().parts();
            for (int layer = 0; layer < format.geometry().layers(); layer++) {
                for (int part = 0; part < parts; part++) {
                    for (int page : new int[] {0, DEVICE_PAGES / 2, DEVICE_PAGES - 1}) {
                        int token = format.pageSizeTokens() - 1;
                        long at = b.rowAddress(layer, part, page, token) - base;
                        assertEquals(
                                DeviceLayout.chunkOffset(format, DEVICE_PAGES, page, layer, part)
                                        + token * format.rowBytes(),
                                at,
                                "layer " + layer + " part " + part + " page " + page);
                        assertTrue(at >= 0 && at + format.rowBytes() <= pool.bytes());
                    }
                }
                assertEquals(parts == 1, b.layers().get(layer).valueAddress() == 0, "a V buffer exactly for MHA");
            }
        }
    }

    /**
     * An engine allocates the KV memory and the cache's pool adopts it: the adopted pool reads and writes the same
     * device memory (a page written through the engine's side reads back through it and the other way round, copies
     * included), its buffers name that memory, and closing it leaves the memory allocated.
     */
    @Test
    void anAdoptedPoolWorksOnTheEnginesMemoryAndLeavesItAllocated() throws Exception {
        PageFormat format = formatFor(HostLayout.PAGE_FIRST);
        try (KvPool engines = runtime.createPool(format, DEVICE_PAGES)) {
            long address = engines.buffers().layers().getFirst().keyAddress();
            fillDevice(engines, new int[] {3});
            HostSlab host = newSlab(format, HOST_SLOTS);
            fillHost(host, new int[] {5});
            MemorySegment flat = arena.allocate(format.pageBytes(), 64);
            try (KvPool adopted = runtime.adoptPool(format, DEVICE_PAGES, address, engines.bytes())) {
                assertEquals(address, adopted.buffers().layers().getFirst().keyAddress());
                adopted.readPage(3, flat);
                assertEquals(
                        -1,
                        PagePattern.firstMismatch(flat, DEVICE_SIDE + 3),
                        "the adopted pool sees what the engine wrote");
                assertTrue(
                        adopted.load(host, new int[] {5}, new int[] {7}).await(Deadline.after(copyTimeout())), "load");
                engines.readPage(7, flat);
                assertEquals(
                        -1,
                        PagePattern.firstMismatch(flat, HOST_SIDE + 5),
                        "a load through the adopted pool lands in the engine's memory");
            }
            // closing the adopted pool left the engine's memory allocated and as it was
            engines.readPage(3, flat);
            assertEquals(-1, PagePattern.firstMismatch(flat, DEVICE_SIDE + 3), "the engine's page after the close");
        }
    }

    @Test
    void adoptingTooLittleOrMisalignedMemoryIsRefused() {
        PageFormat format = formatFor(HostLayout.PAGE_FIRST);
        try (KvPool engines = runtime.createPool(format, DEVICE_PAGES)) {
            long address = engines.buffers().layers().getFirst().keyAddress();
            assertThrows(
                    IllegalArgumentException.class,
                    () -> runtime.adoptPool(format, DEVICE_PAGES, address, engines.bytes() - 1));
            assertThrows(
                    IllegalArgumentException.class,
                    () -> runtime.adoptPool(format, DEVICE_PAGES - 1, address + 8, engines.bytes() - 8));
            assertThrows(IllegalArgumentException.class, () -> runtime.adoptPool(format, 1, 0, engines.bytes()));
        }
    }

    /* ---------------------------------------------------------------- helpers */

    private static PageFormat formatFor(HostLayout layout) {
        return new PageFormat(KvGeometry.mha(4, 2, 64, KvDtype.BFLOAT16), 4, layout);
    }

    /** A hybrid model's parts: window layers of 2 pages of 16 tokens, and a recurrent state of 96 KiB per checkpoint. */
    static Stream<Arguments> hybridParts() {
        HybridGeometry model = HybridGeometry.fullAttention(KvGeometry.mha(4, 2, 64, KvDtype.BFLOAT16))
                .withWindow(KvGeometry.mha(2, 4, 128, KvDtype.BFLOAT16), 32)
                .withState(96 * 1024);
        List<Arguments> all = new ArrayList<>();
        for (HostLayout layout : HostLayout.values()) {
            all.add(Arguments.of("window", model.windowFormat(16, layout)));
            all.add(Arguments.of("state", model.stateFormat(layout)));
        }
        return all.stream();
    }

    /**
     * A hybrid model's window pages and state checkpoints (issue 38) live in device pools of their own formats: a page
     * per window page, a page per state slot. Saved to host slots and restored into other device slots, each is the
     * same bytes, and no other slot changes.
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("hybridParts")
    void hybridWindowPagesAndStateSlotsRoundTripThroughTheHost(String name, PageFormat format) throws Exception {
        int slots = 8;
        try (KvPool pool = runtime.createPool(format, slots)) {
            HostSlab host = newSlab(format, slots);
            fillDevice(pool, range(slots));
            fillHostSentinel(host);
            int[] saved = {5, 2, 7};
            int[] hostSlots = {1, 6, 3};
            assertTrue(pool.backup(saved, host, hostSlots).await(Deadline.after(copyTimeout())), "save timed out");
            for (int i = 0; i < saved.length; i++) {
                assertHostPage(host, hostSlots[i], DEVICE_SIDE + saved[i]);
            }
            assertUntouchedHostSlots(host, hostSlots);
            int[] restoredInto = {0, 4, 6};
            assertTrue(
                    pool.load(host, hostSlots, restoredInto).await(Deadline.after(copyTimeout())), "restore timed out");
            int layers = format.geometry().layers();
            for (int page = 0; page < slots; page++) {
                int at = Arrays.binarySearch(new int[] {0, 4, 6}, page);
                assertDevicePage(pool, page, DEVICE_SIDE + (at >= 0 ? saved[at] : page), layers);
            }
        }
    }

    /** A host slab in fresh off-heap memory, registered with the runtime for the case. */
    protected final HostSlab newSlab(PageFormat format, int slots) {
        MemorySegment memory = arena.allocate(HostSlab.bytesFor(format, slots), 4096);
        registrations.add(runtime.registerHost(memory));
        return new HostSlab(memory, format, slots);
    }

    private int[] pick(int limit, int count) {
        List<Integer> all = new ArrayList<>();
        for (int i = 0; i < limit; i++) {
            all.add(i);
        }
        Collections.shuffle(all, new Random(random.nextLong()));
        int[] picked = new int[count];
        for (int i = 0; i < count; i++) {
            picked[i] = all.get(i);
        }
        return picked;
    }

    private static int[] range(int n) {
        int[] r = new int[n];
        for (int i = 0; i < n; i++) {
            r[i] = i;
        }
        return r;
    }

    private void fillDevice(KvPool pool, int[] pages) {
        MemorySegment flat = arena.allocate(pool.format().pageBytes());
        for (int page : pages) {
            PagePattern.fill(flat, DEVICE_SIDE + page);
            pool.writePage(page, flat);
        }
    }

    private void fillHost(HostSlab host, int[] slots) {
        MemorySegment flat = arena.allocate(host.format().pageBytes());
        for (int slot : slots) {
            PagePattern.fill(flat, HOST_SIDE + slot);
            host.writePage(slot, flat);
        }
    }

    private static void fillHostSentinel(HostSlab host) {
        host.memory().fill(PagePattern.SENTINEL);
    }

    private void assertHostPage(HostSlab host, int slot, long seed) {
        MemorySegment flat = arena.allocate(host.format().pageBytes());
        host.readPage(slot, flat);
        long at = PagePattern.firstMismatch(flat, seed);
        if (at >= 0) {
            fail("host slot " + slot + " (" + host.layout() + ") has wrong bytes from flat offset " + at);
        }
    }

    private void assertUntouchedHostSlots(HostSlab host, int[] written) {
        boolean[] skip = new boolean[host.slots()];
        for (int s : written) {
            skip[s] = true;
        }
        MemorySegment flat = arena.allocate(host.format().pageBytes());
        for (int slot = 0; slot < host.slots(); slot++) {
            if (!skip[slot]) {
                host.readPage(slot, flat);
                assertTrue(PagePattern.isSentinel(flat), "host slot " + slot + " was written but not copied to");
            }
        }
    }

    private void assertDevicePage(KvPool pool, int page, long seed, int layers) {
        String problem = devicePageProblem(pool, page, seed, layers);
        if (problem != null) {
            fail(problem);
        }
    }

    /** Why the first {@code layers} layers of a device page differ from the pattern of {@code seed}, or null. */
    private @Nullable String devicePageProblem(KvPool pool, int page, long seed, int layers) {
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment actual = scratch.allocate(pool.format().pageBytes());
            pool.readPage(page, actual);
            for (int layer = 0; layer < layers; layer++) {
                String bad = PagePattern.layerMismatch(pool.format(), actual, seed, layer);
                if (bad != null) {
                    return "device page " + page + ": " + bad;
                }
            }
        }
        return null;
    }
}
