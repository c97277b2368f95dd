package io.hicache.core.memory.emulated;

import io.hicache.core.memory.AbstractKvPool;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.LayerSignals;
import io.hicache.core.page.PageFormat;
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
import org.jspecify.annotations.Nullable;

/**
 * A KV pool whose "device memory" is off-heap host memory. Copies are split over the runtime's copy threads;
 * each thread walks its share of the pages layer by layer, and a layer is signalled once every thread has
 * copied it (and every earlier layer is signalled). Loads and backups each run on their own stream.
 *
 * <p>Thread-safe. Owns its memory ({@link #close()} waits for its copies and frees it), unless it adopted memory the
 * engine allocated: then closing leaves that memory alone.
 */
final class EmulatedKvPool extends AbstractKvPool {
    private static final System.Logger LOG = System.getLogger(EmulatedKvPool.class.getName());
    private static final long CLOSE_WAIT_SECONDS = 60;

    private final EmulatedDeviceRuntime runtime;
    /** The arena of the memory the pool allocated; null when it adopted the engine's memory. */
    private final @Nullable Arena arena;

    private final MemorySegment memory;
    private final CopyStream loads = new CopyStream();
    private final CopyStream backups = new CopyStream();

    EmulatedKvPool(EmulatedDeviceRuntime runtime, PageFormat format, int pages) {
        super(format, pages, "the emulated KV pool");
        this.runtime = runtime;
        this.arena = Arena.ofShared();
        this.memory = arena.allocate(DeviceLayout.poolBytes(format, pages), 4096);
    }

    /** A pool over {@code memory}, which the engine allocated and frees (after closing the pool). */
    EmulatedKvPool(EmulatedDeviceRuntime runtime, PageFormat format, int pages, MemorySegment memory) {
        super(format, pages, "the emulated KV pool (adopted memory)");
        this.runtime = runtime;
        this.arena = null;
        this.memory = memory;
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
    public Optional<MemorySegment> hostVisibleMemory() {
        return Optional.of(memory);
    }

    @Override
    public long bytes() {
        return memory.byteSize();
    }

    @Override
    protected KvCopy startBackup(
            int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount, boolean perLayer) {
        Job job = new Job(host, devicePages, hostSlots, true, firstLayer, layerCount, perLayer);
        return backups.submit(layerCount, job::start);
    }

    @Override
    protected KvCopy startLoad(HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount) {
        Job job = new Job(host, devicePages, hostSlots, false, firstLayer, layerCount, true);
        return loads.submit(layerCount, job::start);
    }

    @Override
    public void writePage(int devicePage, MemorySegment flat) {
        checkFlat(devicePage, flat);
        forEachRun(
                devicePage,
                (deviceOffset, flatOffset, length) ->
                        MemorySegment.copy(flat, flatOffset, memory, deviceOffset, length));
    }

    @Override
    public void readPage(int devicePage, MemorySegment flat) {
        checkFlat(devicePage, flat);
        forEachRun(
                devicePage,
                (deviceOffset, flatOffset, length) ->
                        MemorySegment.copy(memory, deviceOffset, flat, flatOffset, length));
    }

    @Override
    public void close() {
        if (!markClosed()) {
            return;
        }
        try {
            loads.drained().get(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
            backups.drained().get(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            // Freeing memory that a copy thread still writes would crash it; leak instead, loudly.
            LOG.log(
                    Level.ERROR,
                    "emulated KV pool: copies still running after " + CLOSE_WAIT_SECONDS
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

        Job(
                HostSlab host,
                int[] devicePages,
                int[] hostSlots,
                boolean toHost,
                int firstLayer,
                int layerCount,
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

        private void copyShare(
                int from,
                int to,
                LayerSignals signals,
                AtomicIntegerArray remainingPerLayer,
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
