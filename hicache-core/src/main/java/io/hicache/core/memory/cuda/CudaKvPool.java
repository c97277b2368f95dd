package io.hicache.core.memory.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.memory.CopyChecks;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.LayerSignals;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUDA_MEMCPY2D;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmemorytype;
import jcuda.driver.JCudaDriver;

/**
 * A KV pool in CUDA device memory ({@code cuMemAlloc}), laid out as {@link DeviceLayout} says. Copies to and from a
 * registered host slab run on two streams (loads, backups) either through the copy kernel (one launch for a
 * backup, one per layer for a load, each followed by an event) or, as the fallback and the benchmark's reference,
 * through the copy engine: one {@code cuMemcpy2DAsync} per page and part covering the layers of the launch (per
 * page, part and layer for {@code page_first}, whose host rows are strided).
 *
 * <p>Thread-safe. Owns its device memory and streams; {@link #close()} waits for its copies and frees them.
 */
final class CudaKvPool implements KvPool {
    private static final int THREADS = 256;
    private static final int UNROLL = 4;

    private final CudaDeviceRuntime runtime;
    private final PageFormat format;
    private final int pages;
    private final RawPointers.DeviceAllocation memory = RawPointers.newDeviceAllocation();
    private final long bytes;
    private final PageAllocator allocator;
    private final CudaStream loads;
    private final CudaStream backups;
    private final CUfunction kernel;
    private final AtomicBoolean closed = new AtomicBoolean();

    CudaKvPool(CudaDeviceRuntime runtime, PageFormat format, int pages, CUfunction kernel) {
        this.runtime = runtime;
        this.format = format;
        this.pages = pages;
        this.bytes = DeviceLayout.poolBytes(format, pages);
        this.kernel = kernel;
        runtime.makeCurrent();
        try {
            JCudaDriver.cuMemAlloc(memory, bytes);
        } catch (CudaException e) {
            throw new HiCacheException(ErrorCode.DEVICE_OUT_OF_MEMORY, "a KV pool of " + pages + " pages of "
                    + format.pageBytes() + " bytes (" + bytes + " bytes) does not fit on " + runtime.info().name() + " ("
                    + runtime.info().freeBytes() + " bytes free): " + e.getMessage(), e);
        }
        this.allocator = new PageAllocator("CUDA KV pool", pages);
        long ring = Math.max(1 << 16, 8L * pages);
        this.loads = new CudaStream(runtime.context(), "load-" + Integer.toHexString(System.identityHashCode(this)), ring);
        this.backups = new CudaStream(runtime.context(), "backup-" + Integer.toHexString(System.identityHashCode(this)), ring);
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
    public long bytes() {
        return bytes;
    }

    /** True when copies use the kernel, false when they use the copy engine. */
    boolean usesKernel() {
        return kernel != null;
    }

    @Override
    public KvCopy backup(int[] devicePages, HostSlab host, int[] hostSlots) {
        checkCopy(host);
        CopyChecks.checkPairs(devicePages, pages, "devicePages", hostSlots, host.slots(), "hostSlots");
        int[] pairs = pairs(devicePages, hostSlots);
        int layers = format.geometry().layers();
        return backups.submit(layers, pairs, (stream, indexAddress, signals) -> {
            copy(stream, host, devicePages, hostSlots, indexAddress, 0, layers, true);
            stream.recordAll(signals, "backup of " + devicePages.length + " pages");
        }, "backup of " + devicePages.length + " pages");
    }

    @Override
    public KvCopy load(HostSlab host, int[] hostSlots, int[] devicePages) {
        checkCopy(host);
        CopyChecks.checkPairs(hostSlots, host.slots(), "hostSlots", devicePages, pages, "devicePages");
        int[] pairs = pairs(devicePages, hostSlots);
        int layers = format.geometry().layers();
        return loads.submit(layers, pairs, (stream, indexAddress, signals) -> {
            for (int layer = 0; layer < layers; layer++) {
                copy(stream, host, devicePages, hostSlots, indexAddress, layer, 1, false);
                stream.recordLayer(signals, layer, layer == layers - 1, "load of layer " + layer);
            }
        }, "load of " + devicePages.length + " pages");
    }

    private void checkCopy(HostSlab host) {
        checkOpen();
        CopyChecks.checkSameGeometry(format, host);
        Checks.requireArgument(runtime.isRegistered(host.memory()),
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
    private void copy(CudaStream stream, HostSlab host, int[] devicePages, int[] hostSlots, long indexAddress, int firstLayer,
            int layerCount, boolean toHost) {
        if (kernel != null) {
            launch(stream, host, devicePages.length, indexAddress, firstLayer, layerCount, toHost);
        } else {
            copyEngine(stream, host, devicePages, hostSlots, firstLayer, layerCount, toHost);
        }
    }

    private void launch(CudaStream stream, HostSlab host, int pairs, long indexAddress, int firstLayer, int layerCount,
            boolean toHost) {
        int parts = format.geometry().attention().parts();
        long vectors = (long) pairs * layerCount * parts * (DeviceLayout.chunkBytes(format) / 16);
        long blocksWanted = (vectors + (long) THREADS * UNROLL - 1) / ((long) THREADS * UNROLL);
        int blocks = (int) Math.max(1, Math.min(blocksWanted, 8L * runtime.multiprocessors()));
        Pointer params = Pointer.to(
                Pointer.to(new long[] {memory.address()}),
                Pointer.to(new long[] {host.memory().address()}),
                Pointer.to(new long[] {indexAddress}),
                Pointer.to(new int[] {pairs}),
                Pointer.to(new int[] {firstLayer}),
                Pointer.to(new int[] {layerCount}),
                Pointer.to(new int[] {format.geometry().layers()}),
                Pointer.to(new int[] {parts}),
                Pointer.to(new int[] {format.pageSizeTokens()}),
                Pointer.to(new int[] {(int) format.rowBytes()}),
                Pointer.to(new int[] {pages}),
                Pointer.to(new int[] {host.slots()}),
                Pointer.to(new int[] {layoutCode(host.layout())}),
                Pointer.to(new int[] {toHost ? 1 : 0}));
        JCudaDriver.cuLaunchKernel(kernel, blocks, 1, 1, THREADS, 1, 1, 0, stream.handle(), params, null);
    }

    private static int layoutCode(HostLayout layout) {
        return switch (layout) {
            case LAYER_FIRST -> 0;
            case PAGE_FIRST -> 1;
            case PAGE_FIRST_DIRECT -> 2;
        };
    }

    private void copyEngine(CudaStream stream, HostSlab host, int[] devicePages, int[] hostSlots, int firstLayer,
            int layerCount, boolean toHost) {
        int parts = format.geometry().attention().parts();
        long run = DeviceLayout.chunkBytes(format);
        long row = format.rowBytes();
        int layers = format.geometry().layers();
        long devicePitch = parts * (long) pages * run;
        for (int i = 0; i < devicePages.length; i++) {
            for (int part = 0; part < parts; part++) {
                if (host.chunked()) {
                    // One 2D copy: a run per layer; layer_first host runs are a slab-width apart, page_first_direct's adjacent.
                    long hostPitch = host.layout() == HostLayout.LAYER_FIRST ? (long) host.slots() * run : run;
                    copy2d(stream, DeviceLayout.chunkOffset(format, pages, devicePages[i], firstLayer, part), devicePitch,
                            host.memory().address() + host.chunkOffset(hostSlots[i], firstLayer, part), hostPitch, run,
                            layerCount, toHost);
                } else {
                    for (int layer = firstLayer; layer < firstLayer + layerCount; layer++) {
                        // page_first: the run's rows are a whole token's layers apart on the host.
                        copy2d(stream, DeviceLayout.chunkOffset(format, pages, devicePages[i], layer, part), row,
                                host.memory().address() + host.rowOffset(hostSlots[i], layer, part, 0), layers * row, row,
                                format.pageSizeTokens(), toHost);
                    }
                }
            }
        }
    }

    private void copy2d(CudaStream stream, long deviceOffset, long devicePitch, long hostAddress, long hostPitch, long width,
            long height, boolean toHost) {
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
        JCudaDriver.cuMemcpy2DAsync(c, stream.handle());
    }

    @Override
    public void writePage(int devicePage, MemorySegment flat) {
        checkFlat(devicePage, flat);
        runtime.makeCurrent();
        forEachRun(devicePage, (deviceOffset, flatOffset, length) -> JCudaDriver.cuMemcpyHtoD(
                memory.withByteOffset(deviceOffset), RawPointers.host(flat.address() + flatOffset), length));
    }

    @Override
    public void readPage(int devicePage, MemorySegment flat) {
        checkFlat(devicePage, flat);
        runtime.makeCurrent();
        forEachRun(devicePage, (deviceOffset, flatOffset, length) -> JCudaDriver.cuMemcpyDtoH(
                RawPointers.host(flat.address() + flatOffset), memory.withByteOffset(deviceOffset), length));
    }

    private interface RunAction {
        void run(long deviceOffset, long flatOffset, long length);
    }

    /** Visits the page's runs as (device offset, flat-page offset, length), in the format's flat order. */
    private void forEachRun(int page, RunAction action) {
        int parts = format.geometry().attention().parts();
        long row = format.rowBytes();
        for (int part = 0; part < parts; part++) {
            for (int layer = 0; layer < format.geometry().layers(); layer++) {
                long device = DeviceLayout.chunkOffset(format, pages, page, layer, part);
                switch (format.byteOrder()) {
                    case LAYER_MAJOR -> action.run(device, format.rowOffset(part, layer, 0), DeviceLayout.chunkBytes(format));
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
        checkOpen();
        Checks.requireArgument(devicePage >= 0 && devicePage < pages, "device page %d is out of range [0, %d)", devicePage,
                pages);
        Checks.requireArgument(flat.isNative() && flat.byteSize() == format.pageBytes(),
                "a flat page is %d bytes of native memory, got %s", format.pageBytes(), flat);
    }

    private void checkOpen() {
        Checks.requireState(!closed.get(), "the CUDA KV pool is closed");
    }

    /** Failed copies since the pool opened, on both streams. */
    long copyFailures() {
        return loads.failures() + backups.failures();
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        loads.close();
        backups.close();
        runtime.makeCurrent();
        JCudaDriver.cuMemFree(memory);
        runtime.released(this);
    }

    @Override
    public String toString() {
        return "CudaKvPool[" + pages + " pages, " + format + ", " + (kernel != null ? "kernel" : "copy engine") + "]";
    }
}
