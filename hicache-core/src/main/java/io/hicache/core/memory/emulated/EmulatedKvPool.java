package io.hicache.core.memory.emulated;

import io.hicache.core.memory.CopyChecks;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.LayerSignals;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * A KV pool whose "device memory" is off-heap host memory. Copies are split over the runtime's copy threads;
 * each thread walks its share of the pages layer by layer, and a layer is signalled once every thread has
 * copied it (and every earlier layer is signalled). Loads and backups each run on their own stream.
 *
 * <p>Thread-safe. Owns its memory ({@link #close()} waits for its copies and frees it), unless it adopted memory the
 * engine allocated: then closing leaves that memory alone.
 */
final class EmulatedKvPool implements KvPool {
    private static final System.Logger LOG = System.getLogger(EmulatedKvPool.class.getName());
    private static final long CLOSE_WAIT_SECONDS = 60;

    private final EmulatedDeviceRuntime runtime;
    private final PageFormat format;
    private final int pages;
    /** The arena of the memory the pool allocated; null when it adopted the engine's memory. */
    private final Arena arena;
    private final MemorySegment memory;
    private final PageAllocator allocator;
    private final CopyStream loads = new CopyStream();
    private final CopyStream backups = new CopyStream();
    private final AtomicBoolean closed = new AtomicBoolean();

    EmulatedKvPool(EmulatedDeviceRuntime runtime, PageFormat format, int pages) {
        this.runtime = runtime;
        this.format = format;
        this.pages = pages;
        this.arena = Arena.ofShared();
        this.memory = arena.allocate(DeviceLayout.poolBytes(format, pages), 4096);
        this.allocator = new PageAllocator("emulated KV pool", pages);
    }

    /** A pool over {@code memory}, which the engine allocated and frees (after closing the pool). */
    EmulatedKvPool(EmulatedDeviceRuntime runtime, PageFormat format, int pages, MemorySegment memory) {
        this.runtime = runtime;
        this.format = format;
        this.pages = pages;
        this.arena = null;
        this.memory = memory;
        this.allocator = new PageAllocator("emulated KV pool (adopted memory)", pages);
    }

    /** Whether the pool allocated its memory (false: adopted the engine's). */
    boolean ownsMemory() {
        return arena != null;
    }

    @Override
    public DeviceBuffers buffers() {
        return DeviceBuffers.of("emulated", format, pages, memory.address());
    }

    @Override
    public PageFormat format() {
        return format;
    }

    @Override
    public int pages() {
        return pages;
    }

    @Override
    public PageAllocator allocator() {
        return allocator;
    }

    @Override
    public Optional<MemorySegment> hostVisibleMemory() {
        return Optional.of(memory);
    }

    @Override
    public long bytes() {
        return memory.byteSize();
    }

    @Override
    public KvCopy backup(int[] devicePages, HostSlab host, int[] hostSlots) {
        checkOpen();
        CopyChecks.checkSameGeometry(format, host);
        CopyChecks.checkPairs(devicePages, pages, "devicePages", hostSlots, host.slots(), "hostSlots");
        Job job = new Job(host, devicePages.clone(), hostSlots.clone(), true, 0, format.geometry().layers(), false);
        return backups.submit(format.geometry().layers(), job::start);
    }

    @Override
    public KvCopy backupLayers(int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount) {
        checkOpen();
        CopyChecks.checkSameGeometry(format, host);
        CopyChecks.checkLayers(format, firstLayer, layerCount);
        CopyChecks.checkPairs(devicePages, pages, "devicePages", hostSlots, host.slots(), "hostSlots");
        Job job = new Job(host, devicePages.clone(), hostSlots.clone(), true, firstLayer, layerCount, true);
        return backups.submit(layerCount, job::start);
    }

    @Override
    public KvCopy loadLayers(HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount) {
        checkOpen();
        CopyChecks.checkSameGeometry(format, host);
        CopyChecks.checkLayers(format, firstLayer, layerCount);
        CopyChecks.checkPairs(hostSlots, host.slots(), "hostSlots", devicePages, pages, "devicePages");
        Job job = new Job(host, devicePages.clone(), hostSlots.clone(), false, firstLayer, layerCount, true);
        return loads.submit(layerCount, job::start);
    }

    @Override
    public KvCopy load(HostSlab host, int[] hostSlots, int[] devicePages) {
        return loadLayers(host, hostSlots, devicePages, 0, format.geometry().layers());
    }

    @Override
    public void writePage(int devicePage, MemorySegment flat) {
        checkOpen();
        checkFlat(devicePage, flat);
        forEachChunk(devicePage, (deviceOffset, flatOffset, length) ->
                MemorySegment.copy(flat, flatOffset, memory, deviceOffset, length));
    }

    @Override
    public void readPage(int devicePage, MemorySegment flat) {
        checkOpen();
        checkFlat(devicePage, flat);
        forEachChunk(devicePage, (deviceOffset, flatOffset, length) ->
                MemorySegment.copy(memory, deviceOffset, flat, flatOffset, length));
    }

    private interface ChunkAction {
        void run(long deviceOffset, long flatOffset, long length);
    }

    /** Visits the page's runs as (device offset, flat-page offset, length), in the format's flat order. */
    private void forEachChunk(int page, ChunkAction action) {
        int parts = format.geometry().attention().parts();
        long row = format.rowBytes();
        long chunk = DeviceLayout.chunkBytes(format);
        for (int part = 0; part < parts; part++) {
            for (int layer = 0; layer < format.geometry().layers(); layer++) {
                long device = DeviceLayout.chunkOffset(format, pages, page, layer, part);
                switch (format.byteOrder()) {
                    case LAYER_MAJOR -> action.run(device, format.rowOffset(part, layer, 0), chunk);
                    case TOKEN_MAJOR -> {
                        for (int t = 0; t < format.pageSizeTokens(); t++) {
                            action.run(device + t * row, format.rowOffset(part, layer, t), row);
                        }
                    }
                }
            }
        }
    }

    private void checkFlat(int devicePage, MemorySegment flat) {
        Checks.requireArgument(devicePage >= 0 && devicePage < pages, "device page %d is out of range [0, %d)",
                devicePage, pages);
        Checks.checkNotNull(flat, "flat");
        Checks.requireArgument(flat.byteSize() == format.pageBytes(), "a flat page is %d bytes, got %d",
                format.pageBytes(), flat.byteSize());
    }

    private void checkOpen() {
        Checks.requireState(!closed.get(), "the emulated KV pool is closed");
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            loads.drained().get(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
            backups.drained().get(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            // Freeing memory that a copy thread still writes would crash it; leak instead, loudly.
            LOG.log(Level.ERROR, "emulated KV pool: copies still running after " + CLOSE_WAIT_SECONDS
                    + " s; its memory is left allocated");
            return;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            LOG.log(Level.ERROR, "emulated KV pool: interrupted while closing; its memory is left allocated");
            return;
        } catch (ExecutionException e) {
            // Drained futures never fail; nothing to do.
        }
        if (arena != null) {
            arena.close();
        }
        runtime.released(this);
    }

    /**
     * One copy of a range of layers: the pairs are cut into one share per copy thread; each share is copied layer by
     * layer. With {@code perLayer} (loads, staged gathers) every layer is signalled as soon as all shares have copied
     * it; without (a backup) everything is signalled at the end, as one operation.
     */
    private final class Job {
        private final HostSlab host;
        private final int[] devicePages;
        private final int[] hostSlots;
        private final boolean toHost;
        private final int firstLayer;
        private final int layerCount;
        private final boolean perLayer;
        private final AtomicBoolean failed = new AtomicBoolean();

        Job(HostSlab host, int[] devicePages, int[] hostSlots, boolean toHost, int firstLayer, int layerCount,
                boolean perLayer) {
            this.host = host;
            this.devicePages = devicePages;
            this.hostSlots = hostSlots;
            this.toHost = toHost;
            this.firstLayer = firstLayer;
            this.layerCount = layerCount;
            this.perLayer = perLayer;
        }

        void start(LayerSignals signals) {
            int layers = layerCount;
            if (devicePages.length == 0) {
                signals.allLanded();
                return;
            }
            int shares = Math.min(runtime.copyThreads(), devicePages.length);
            AtomicIntegerArray remainingPerLayer = new AtomicIntegerArray(layers);
            for (int l = 0; l < layers; l++) {
                remainingPerLayer.set(l, shares);
            }
            AtomicInteger remainingShares = new AtomicInteger(shares);
            Executor threads = runtime.copyExecutor();
            for (int s = 0; s < shares; s++) {
                int from = (int) ((long) devicePages.length * s / shares);
                int to = (int) ((long) devicePages.length * (s + 1) / shares);
                threads.execute(() -> copyShare(from, to, signals, remainingPerLayer, remainingShares));
            }
        }

        private void copyShare(int from, int to, LayerSignals signals, AtomicIntegerArray remainingPerLayer,
                AtomicInteger remainingShares) {
            try {
                for (int j = 0; j < layerCount; j++) {
                    if (failed.get()) {
                        return;
                    }
                    for (int i = from; i < to; i++) {
                        copyLayer(devicePages[i], hostSlots[i], firstLayer + j);
                    }
                    if (perLayer && remainingPerLayer.decrementAndGet(j) == 0) {
                        signals.landed(j);
                    }
                }
                if (!perLayer && remainingShares.decrementAndGet() == 0) {
                    signals.allLanded();
                }
            } catch (Throwable t) {
                failed.set(true);
                runtime.copyFailed(t);
                signals.fail(toHost ? "backup to host failed" : "load to device failed", t);
            }
        }

        private void copyLayer(int devicePage, int hostSlot, int layer) {
            int parts = format.geometry().attention().parts();
            long row = format.rowBytes();
            long chunk = DeviceLayout.chunkBytes(format);
            for (int part = 0; part < parts; part++) {
                long device = DeviceLayout.chunkOffset(format, pages, devicePage, layer, part);
                if (host.chunked()) {
                    copy(device, host.chunkOffset(hostSlot, layer, part), chunk);
                } else {
                    for (int t = 0; t < format.pageSizeTokens(); t++) {
                        copy(device + t * row, host.rowOffset(hostSlot, layer, part, t), row);
                    }
                }
            }
        }

        private void copy(long deviceOffset, long hostOffset, long length) {
            if (toHost) {
                MemorySegment.copy(memory, deviceOffset, host.memory(), hostOffset, length);
            } else {
                MemorySegment.copy(host.memory(), hostOffset, memory, deviceOffset, length);
            }
        }
    }
}
