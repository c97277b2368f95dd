package io.hicache.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.memory.AbstractKvPool;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUDA_MEMCPY2D;
import jcuda.driver.CUmemorytype;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * A KV pool in CUDA device memory ({@code cuMemAlloc}), laid out as {@link DeviceLayout} says. Copies to and from a
 * registered host slab run on two {@link CudaStream}s (loads, backups) either through the copy kernel (one launch
 * for a backup, one per layer for a load, or per {@link CudaTuning#layersPerLoadLaunch()} layers, each followed by an
 * event; a load's launches alternate between the lanes {@link CudaTuning#loadLanes()} asks for) or, as the fallback
 * and the benchmark's reference, through the copy engine: one {@code cuMemcpy2DAsync} per page and part covering the layers of the launch (per
 * page, part and layer for {@code page_first}, whose host rows are strided).
 *
 * <p>Thread-safe. Owns its device memory, streams and launch arguments; {@link #close()} waits for its copies and
 * frees them.
 */
final class CudaKvPool extends AbstractKvPool {
    private static final int THREADS = 256;
    /** The 32-bit kernels' index arithmetic holds a launch's vectors plus one grid stride of loads below this. */
    private static final long NARROW_LIMIT = 1L << 31;
    /** A load's launch takes up to this many blocks per multiprocessor (2048 resident threads of 256). */
    private static final int MAX_BLOCKS_PER_MULTIPROCESSOR = 8;

    private final CudaDeviceRuntime runtime;
    private final DevicePointer memory;
    private final long bytes;
    private final CudaStream loads;
    private final CudaStream backups;
    private final boolean useKernel;
    private final CudaTuning tuning;
    private final LaunchArguments loadArguments = new LaunchArguments();
    private final LaunchArguments backupArguments = new LaunchArguments();

    /**
     * A pool in device memory it allocates, or, with {@code adoptedAddress} other than 0, over memory the engine
     * allocated there (never freed here).
     */
    CudaKvPool(CudaDeviceRuntime runtime, PageFormat format, int pages, boolean useKernel, long adoptedAddress) {
        super(format, pages, "the CUDA KV pool");
        this.runtime = runtime;
        this.bytes = DeviceLayout.poolBytes(format, pages);
        this.useKernel = useKernel;
        this.tuning = runtime.tuning();
        runtime.makeCurrent();
        if (adoptedAddress != 0) {
            this.memory = DevicePointer.at(adoptedAddress);
        } else {
            this.memory = new DevicePointer();
            try {
                JCudaDriver.cuMemAlloc(memory, bytes);
            } catch (CudaException e) {
                throw new HiCacheException(
                        ErrorCode.DEVICE_OUT_OF_MEMORY,
                        "a KV pool of " + pages + " pages of "
                                + format.pageBytes() + " bytes (" + bytes + " bytes) does not fit on "
                                + runtime.info().name()
                                + " (" + runtime.info().freeBytes() + " bytes free): " + e.getMessage(),
                        e);
            }
        }
        long ring = Math.max(1 << 16, 8L * pages);
        String id = Integer.toHexString(System.identityHashCode(this));
        // Loads launch once per layer (or group of layers): several lanes let a launch overlap the previous one's tail.
        this.loads =
                new CudaStream(runtime.context(), "load-" + id, tuning.loadLanes(), ring, tuning.prioritizeLoads());
        this.backups = new CudaStream(runtime.context(), "backup-" + id, 1, ring, false);
    }

    @Override
    public long bytes() {
        return bytes;
    }

    @Override
    public DeviceBuffers buffers() {
        return DeviceBuffers.of("cuda", format, pages, memory.address());
    }

    /** True when copies use the kernel, false when they use the copy engine. */
    boolean usesKernel() {
        return useKernel;
    }

    @Override
    protected KvCopy startBackup(
            int[] devicePages, HostSlab host, int[] hostSlots, int firstLayer, int layerCount, boolean perLayer) {
        if (perLayer) {
            return byLayer(backups, devicePages, host, hostSlots, firstLayer, layerCount, true);
        }
        int[] pairs = pairs(devicePages, hostSlots);
        return backups.submit(
                layerCount,
                pairs,
                (stream, indexAddress, signals) -> {
                    copy(stream.lane(0), host, devicePages, hostSlots, indexAddress, firstLayer, layerCount, true);
                    stream.recordAll(signals, "backup of " + devicePages.length + " pages");
                },
                "backup of " + devicePages.length + " pages");
    }

    @Override
    protected KvCopy startLoad(HostSlab host, int[] hostSlots, int[] devicePages, int firstLayer, int layerCount) {
        return byLayer(loads, devicePages, host, hostSlots, firstLayer, layerCount, false);
    }

    /**
     * One launch (or copy-engine batch) per layer on {@code stream}, each followed by its layer's event; a load groups
     * {@link CudaTuning#layersPerLoadLaunch} layers per launch and event.
     */
    private KvCopy byLayer(
            CudaStream stream,
            int[] devicePages,
            HostSlab host,
            int[] hostSlots,
            int firstLayer,
            int layerCount,
            boolean toHost) {
        String what = (toHost ? "copy to host" : "load") + " of layers " + firstLayer + "+" + layerCount + " of "
                + devicePages.length + " pages";
        // A load may launch several layers at once (CudaTuning.layersPerLoadLaunch): fewer launches and events, each
        // group's layers signalled together when its launch ends.
        int group = toHost ? 1 : Math.min(layerCount, tuning.layersPerLoadLaunch());
        return stream.submit(
                layerCount,
                pairs(devicePages, hostSlots),
                (s, indexAddress, signals) -> {
                    int launch = 0;
                    for (int j = 0; j < layerCount; j += group, launch++) {
                        int n = Math.min(group, layerCount - j);
                        copy(s.lane(launch), host, devicePages, hostSlots, indexAddress, firstLayer + j, n, toHost);
                        s.recordLayers(signals, j, n, launch, j + n == layerCount, what);
                    }
                },
                what);
    }

    @Override
    protected void checkCopy(HostSlab host) {
        super.checkCopy(host);
        Checks.requireArgument(
                runtime.isRegistered(host.memory()),
                "the host slab is not registered with the CUDA runtime: register it with registerHost first");
    }

    /** The index list the kernel reads: device pages, then host slots. */
    private static int[] pairs(int[] devicePages, int[] hostSlots) {
        int[] pairs = new int[devicePages.length * 2];
        System.arraycopy(devicePages, 0, pairs, 0, devicePages.length);
        System.arraycopy(hostSlots, 0, pairs, devicePages.length, hostSlots.length);
        return pairs;
    }

    /** Enqueues the copy of layers [firstLayer, firstLayer + layerCount) of every pair. */
    private void copy(
            CUstream stream,
            HostSlab host,
            int[] devicePages,
            int[] hostSlots,
            long indexAddress,
            int firstLayer,
            int layerCount,
            boolean toHost) {
        if (useKernel) {
            launch(stream, host, devicePages.length, indexAddress, firstLayer, layerCount, toHost);
        } else {
            copyEngine(stream, host, devicePages, hostSlots, firstLayer, layerCount, toHost);
        }
    }

    private void launch(
            CUstream stream,
            HostSlab host,
            int pairs,
            long indexAddress,
            int firstLayer,
            int layerCount,
            boolean toHost) {
        int parts = format.geometry().attention().parts();
        long vectors = (long) pairs * layerCount * parts * (DeviceLayout.chunkBytes(format) / 16);
        CudaTuning.Kernel kernel = tuning.kernel();
        int perMultiprocessor = toHost ? tuning.backupBlocksPerMultiprocessor() : MAX_BLOCKS_PER_MULTIPROCESSOR;
        int blocks = blocks(vectors, kernel.unroll(), perMultiprocessor);
        if (kernel != CudaTuning.Kernel.WIDE
                && (vectors >= NARROW_LIMIT || (long) blocks * THREADS * kernel.unroll() >= NARROW_LIMIT)) {
            kernel = CudaTuning.Kernel.WIDE;
            blocks = blocks(vectors, kernel.unroll(), perMultiprocessor);
        }
        // Walking a page in host order only changes anything for page_first_direct, whose pages are contiguous.
        boolean partOuter = tuning.hostOrder() && host.layout() == HostLayout.PAGE_FIRST_DIRECT;
        // Loads and backups run on their own streams, each under its own lock: each has its own arguments.
        LaunchArguments a = toHost ? backupArguments : loadArguments;
        a.setLong(0, memory.address());
        a.setLong(1, host.memory().address());
        a.setLong(2, indexAddress);
        a.setInt(3, pairs);
        a.setInt(4, firstLayer);
        a.setInt(5, layerCount);
        a.setInt(6, format.geometry().layers());
        a.setInt(7, parts);
        a.setInt(8, format.pageSizeTokens());
        a.setInt(9, (int) format.rowBytes());
        a.setInt(10, pages);
        a.setInt(11, host.slots());
        a.setInt(12, layoutCode(host.layout()));
        a.setInt(13, toHost ? 1 : 0);
        a.setInt(14, partOuter ? 1 : 0);
        JCudaDriver.cuLaunchKernel(
                runtime.kernel(kernel), blocks, 1, 1, THREADS, 1, 1, 0, stream, a.kernelParams, null);
    }

    /**
     * Enough blocks for one pass, at most {@code perMultiprocessor} per multiprocessor: beyond that threads loop over
     * the rest.
     */
    private int blocks(long vectors, int unroll, int perMultiprocessor) {
        long wanted = (vectors + (long) THREADS * unroll - 1) / ((long) THREADS * unroll);
        return (int) Math.max(1, Math.min(wanted, (long) perMultiprocessor * runtime.multiprocessors()));
    }

    private static int layoutCode(HostLayout layout) {
        return switch (layout) {
            case LAYER_FIRST -> 0;
            case PAGE_FIRST -> 1;
            case PAGE_FIRST_DIRECT -> 2;
        };
    }

    private void copyEngine(
            CUstream stream,
            HostSlab host,
            int[] devicePages,
            int[] hostSlots,
            int firstLayer,
            int layerCount,
            boolean toHost) {
        int parts = format.geometry().attention().parts();
        long run = DeviceLayout.chunkBytes(format);
        long row = format.rowBytes();
        int layers = format.geometry().layers();
        long devicePitch = parts * (long) pages * run;
        for (int i = 0; i < devicePages.length; i++) {
            for (int part = 0; part < parts; part++) {
                if (host.chunked()) {
                    // One 2D copy: a run per layer; layer_first host runs are a slab-width apart, page_first_direct's
                    // adjacent.
                    long hostPitch = host.layout() == HostLayout.LAYER_FIRST ? (long) host.slots() * run : run;
                    copy2d(
                            stream,
                            DeviceLayout.chunkOffset(format, pages, devicePages[i], firstLayer, part),
                            devicePitch,
                            host.memory().address() + host.chunkOffset(hostSlots[i], firstLayer, part),
                            hostPitch,
                            run,
                            layerCount,
                            toHost);
                } else {
                    for (int layer = firstLayer; layer < firstLayer + layerCount; layer++) {
                        // page_first: the run's rows are a whole token's layers apart on the host.
                        copy2d(
                                stream,
                                DeviceLayout.chunkOffset(format, pages, devicePages[i], layer, part),
                                row,
                                host.memory().address() + host.rowOffset(hostSlots[i], layer, part, 0),
                                layers * row,
                                row,
                                format.pageSizeTokens(),
                                toHost);
                    }
                }
            }
        }
    }

    /**
     * Copies {@code height} rows of {@code width} bytes, a pitch apart on each side, as few 2D copies as the host
     * registration slices allow: rows are grouped while they stay inside one slice.
     */
    private void copy2d(
            CUstream stream,
            long deviceOffset,
            long devicePitch,
            long hostAddress,
            long hostPitch,
            long width,
            long height,
            boolean toHost) {
        long row = 0;
        while (row < height) {
            long first = hostAddress + row * hostPitch;
            long sliceEnd = runtime.sliceEnd(first);
            Checks.requireState(sliceEnd > 0, "host memory at 0x%x is not registered", first);
            long rows = 1;
            while (row + rows < height && hostAddress + (row + rows) * hostPitch + width <= sliceEnd) {
                rows++;
            }
            if (first + width > sliceEnd) {
                // One row straddles slices (a row may be longer than a slice: a hybrid model's state): copy it in
                // parts that each stay inside one.
                long done = 0;
                while (done < width) {
                    long at = first + done;
                    long end = runtime.sliceEnd(at);
                    Checks.requireState(end > 0, "host memory at 0x%x is not registered", at);
                    long part = Math.min(width - done, end - at);
                    memcpy2d(
                            stream,
                            deviceOffset + row * devicePitch + done,
                            devicePitch,
                            at,
                            hostPitch,
                            part,
                            1,
                            toHost);
                    done += part;
                }
            } else {
                memcpy2d(stream, deviceOffset + row * devicePitch, devicePitch, first, hostPitch, width, rows, toHost);
            }
            row += rows;
        }
    }

    private void memcpy2d(
            CUstream stream,
            long deviceOffset,
            long devicePitch,
            long hostAddress,
            long hostPitch,
            long width,
            long height,
            boolean toHost) {
        CUDA_MEMCPY2D c = new CUDA_MEMCPY2D();
        c.WidthInBytes = width;
        c.Height = height;
        if (toHost) {
            c.srcMemoryType = CUmemorytype.CU_MEMORYTYPE_DEVICE;
            c.srcDevice = memory.withByteOffset(deviceOffset);
            c.srcPitch = devicePitch;
            c.dstMemoryType = CUmemorytype.CU_MEMORYTYPE_HOST;
            c.dstHost = RawPointers.host(hostAddress);
            c.dstPitch = hostPitch;
        } else {
            c.srcMemoryType = CUmemorytype.CU_MEMORYTYPE_HOST;
            c.srcHost = RawPointers.host(hostAddress);
            c.srcPitch = hostPitch;
            c.dstMemoryType = CUmemorytype.CU_MEMORYTYPE_DEVICE;
            c.dstDevice = memory.withByteOffset(deviceOffset);
            c.dstPitch = devicePitch;
        }
        JCudaDriver.cuMemcpy2DAsync(c, stream);
    }

    @Override
    public void writePage(int devicePage, MemorySegment flat) {
        checkNativeFlat(devicePage, flat);
        runtime.makeCurrent();
        forEachRun(
                devicePage,
                (deviceOffset, flatOffset, length) -> JCudaDriver.cuMemcpyHtoD(
                        memory.withByteOffset(deviceOffset), RawPointers.host(flat.address() + flatOffset), length));
    }

    @Override
    public void readPage(int devicePage, MemorySegment flat) {
        checkNativeFlat(devicePage, flat);
        runtime.makeCurrent();
        forEachRun(
                devicePage,
                (deviceOffset, flatOffset, length) -> JCudaDriver.cuMemcpyDtoH(
                        RawPointers.host(flat.address() + flatOffset), memory.withByteOffset(deviceOffset), length));
    }

    /** {@link #checkFlat}, and {@code flat} in native memory, which the driver copies to and from. */
    private void checkNativeFlat(int devicePage, MemorySegment flat) {
        checkFlat(devicePage, flat);
        Checks.requireArgument(flat.isNative(), "a flat page must be native memory, got %s", flat);
    }

    /** Failed copies since the pool opened, on both streams. */
    long copyFailures() {
        return loads.failures() + backups.failures();
    }

    @Override
    public void close() {
        if (!markClosed()) {
            return;
        }
        loads.close();
        backups.close();
        loadArguments.close();
        backupArguments.close();
        runtime.makeCurrent();
        if (!memory.given()) { // an adopted pool's memory is the engine's
            JCudaDriver.cuMemFree(memory);
        }
        runtime.released(this);
    }

    /**
     * The copy kernel's arguments in native memory, with the array of pointers to them that {@code cuLaunchKernel}
     * takes: rewritten before each launch (the driver copies them at the call), so a launch allocates nothing and
     * JCuda passes one address. Used under its stream's lock; the pool closes it.
     */
    private static final class LaunchArguments implements AutoCloseable {
        private static final int COUNT = 15;
        private final Arena arena = Arena.ofShared();
        private final MemorySegment values = arena.allocate(8L * COUNT, 8);
        final Pointer kernelParams;

        LaunchArguments() {
            MemorySegment pointers = arena.allocate(8L * COUNT, 8);
            for (int i = 0; i < COUNT; i++) {
                pointers.setAtIndex(ValueLayout.JAVA_LONG, i, values.address() + 8L * i);
            }
            this.kernelParams = RawPointers.host(pointers.address());
        }

        void setLong(int index, long value) {
            values.setAtIndex(ValueLayout.JAVA_LONG, index, value);
        }

        void setInt(int index, int value) {
            values.set(ValueLayout.JAVA_INT, 8L * index, value);
        }

        @Override
        public void close() {
            arena.close();
        }
    }

    @Override
    public String toString() {
        return "CudaKvPool[" + pages + " pages, " + format + ", " + (useKernel ? "kernel, " + tuning : "copy engine")
                + "]";
    }
}
