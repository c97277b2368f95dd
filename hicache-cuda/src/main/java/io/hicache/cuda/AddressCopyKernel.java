package io.hicache.cuda;

import io.hicache.core.util.Checks;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import jcuda.Pointer;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * Many copies between device addresses in one kernel launch ({@code hicache_address_copy}): a list of (source, target,
 * bytes) is staged in pinned host memory, uploaded on the caller's stream and read by the kernel, one block per copy.
 * Addresses may be this device's memory or a peer's mapped here (CUDA IPC, peer access), so that a batch of small
 * requests costs one launch instead of one {@code cuMemcpyAsync} each. Loaded in the context current when
 * {@link #load} is called, and used in that context only.
 *
 * <p>Not thread-safe: one caller at a time, on one stream (a later list is uploaded on that stream behind the kernels
 * that read earlier ones). The caller closes it, after the work it enqueued has completed.
 */
public final class AddressCopyKernel implements AutoCloseable {
    private static final String ENTRY = "hicache_address_copy";
    private static final int THREADS = 256;
    private static final int MAX_BLOCKS = 65_535;
    private static final long ENTRY_BYTES = 3 * Long.BYTES;

    private final int capacity;
    private final CUmodule module = new CUmodule();
    private final CUfunction function = new CUfunction();
    private final DevicePointer list = new DevicePointer();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment mirror;
    private final CUevent uploaded = new CUevent();
    private boolean uploading;

    private AddressCopyKernel(int capacity) {
        this.capacity = capacity;
        this.mirror = arena.allocate(capacity * ENTRY_BYTES, 4096);
    }

    /**
     * Loads the kernel in the current context, with room for {@code capacity} copies per launch (longer lists go in
     * several launches).
     *
     * @throws jcuda.CudaException when the module, the list's device memory or the pinned mirror cannot be had
     * @throws IOException when the PTX is missing from the class path
     */
    public static AddressCopyKernel load(int capacity) throws IOException {
        Checks.requireArgument(capacity >= 1 && capacity <= 1 << 20, "capacity must be 1..2^20, got %d", capacity);
        AddressCopyKernel k = new AddressCopyKernel(capacity);
        String ptx = CudaDeviceRuntime.ptx();
        boolean moduleLoaded = false;
        boolean registered = false;
        try {
            JCudaDriver.cuModuleLoadData(k.module, ptx);
            moduleLoaded = true;
            JCudaDriver.cuModuleGetFunction(k.function, k.module, ENTRY);
            JCudaDriver.cuMemHostRegister(RawPointers.host(k.mirror.address()), k.mirror.byteSize(), 0);
            registered = true;
            JCudaDriver.cuMemAlloc(k.list, k.mirror.byteSize());
            JCudaDriver.cuEventCreate(k.uploaded, CUevent_flags.CU_EVENT_DISABLE_TIMING);
            return k;
        } catch (RuntimeException e) {
            if (k.list.address() != 0) {
                JCudaDriver.cuMemFree(k.list);
            }
            if (registered) {
                JCudaDriver.cuMemHostUnregister(RawPointers.host(k.mirror.address()));
            }
            if (moduleLoaded) {
                JCudaDriver.cuModuleUnload(k.module);
            }
            k.arena.close();
            throw e;
        }
    }

    /**
     * Enqueues copies {@code i < count}: {@code bytes[i]} bytes from {@code sources[i]} to {@code targets[i]}, on
     * {@code stream}, after the work enqueued on it before. The copies of one call must not overlap. Returns once they
     * are enqueued; work enqueued on the stream after this call sees them done.
     */
    public void enqueue(long[] sources, long[] targets, long[] bytes, int count, CUstream stream) {
        Checks.requireArgument(
                count >= 0 && count <= sources.length && count <= targets.length && count <= bytes.length,
                "count %d is outside the lists",
                count);
        for (int from = 0; from < count; from += capacity) {
            int n = Math.min(capacity, count - from);
            if (uploading) {
                JCudaDriver.cuEventSynchronize(uploaded); // the mirror is free once the last upload has run
            }
            for (int i = 0; i < n; i++) {
                long at = i * ENTRY_BYTES;
                mirror.set(ValueLayout.JAVA_LONG, at, sources[from + i]);
                mirror.set(ValueLayout.JAVA_LONG, at + Long.BYTES, targets[from + i]);
                mirror.set(ValueLayout.JAVA_LONG, at + 2 * Long.BYTES, bytes[from + i]);
            }
            JCudaDriver.cuMemcpyHtoDAsync(list, RawPointers.host(mirror.address()), n * ENTRY_BYTES, stream);
            JCudaDriver.cuEventRecord(uploaded, stream);
            uploading = true;
            Pointer params = Pointer.to(Pointer.to(list), Pointer.to(new int[] {n}));
            JCudaDriver.cuLaunchKernel(function, Math.min(n, MAX_BLOCKS), 1, 1, THREADS, 1, 1, 0, stream, params, null);
        }
    }

    /** Frees the list's memory and unloads the kernel; the caller made sure nothing it enqueued is still running. */
    @Override
    public void close() {
        JCudaDriver.cuEventDestroy(uploaded);
        JCudaDriver.cuMemFree(list);
        JCudaDriver.cuMemHostUnregister(RawPointers.host(mirror.address()));
        JCudaDriver.cuModuleUnload(module);
        arena.close();
    }
}
