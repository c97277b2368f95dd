package io.hicache.cuda;

import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * One contiguous copy between registered host memory and a device buffer on its own stream: the ceiling a copy of
 * scattered pages is measured against (the link's speed). For benchmarks and diagnostics.
 *
 * <p>Not thread-safe. Owns its device buffer and stream; close it before its runtime.
 */
public final class ContiguousCopy implements AutoCloseable {
    private final CudaDeviceRuntime runtime;
    private final DevicePointer buffer = new DevicePointer();
    private final long bytes;
    private final CUstream stream = new CUstream();

    /** A device buffer of {@code bytes} on {@code runtime}'s device. */
    public ContiguousCopy(CudaDeviceRuntime runtime, long bytes) {
        this.runtime = runtime;
        this.bytes = Checks.checkPositive(bytes, "bytes");
        runtime.makeCurrent();
        JCudaDriver.cuMemAlloc(buffer, bytes);
        JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING);
    }

    /** Copies {@code length} bytes from the start of {@code host} to the device, or back, and waits for it. */
    public void copy(MemorySegment host, long length, boolean toHost) {
        enqueue(host, length, toHost);
        await();
    }

    /** Enqueues the copy {@link #copy} makes, without waiting: several can be in flight, one after another. */
    public void enqueue(MemorySegment host, long length, boolean toHost) {
        Checks.requireArgument(
                length <= bytes && length <= host.byteSize(),
                "cannot copy %d bytes: buffer %d, host %d",
                length,
                bytes,
                host.byteSize());
        Checks.requireArgument(runtime.isRegistered(host.asSlice(0, length)), "the host memory is not registered");
        runtime.makeCurrent();
        // One copy per registration slice: the driver wants one registration per copy.
        long done = 0;
        while (done < length) {
            long address = host.address() + done;
            long piece = Math.min(length - done, runtime.sliceEnd(address) - address);
            if (toHost) {
                JCudaDriver.cuMemcpyDtoHAsync(RawPointers.host(address), buffer.withByteOffset(done), piece, stream);
            } else {
                JCudaDriver.cuMemcpyHtoDAsync(buffer.withByteOffset(done), RawPointers.host(address), piece, stream);
            }
            done += piece;
        }
    }

    /** Waits for every copy enqueued so far. */
    public void await() {
        runtime.makeCurrent();
        JCudaDriver.cuStreamSynchronize(stream);
    }

    /**
     * The same copy from or to host memory that is not pinned: the driver stages it through its own buffers. The
     * reference that shows what pinning the host slab is worth.
     */
    public void copyPageable(MemorySegment host, long length, boolean toHost) {
        Checks.requireArgument(
                length <= bytes && length <= host.byteSize(),
                "cannot copy %d bytes: buffer %d, host %d",
                length,
                bytes,
                host.byteSize());
        runtime.makeCurrent();
        if (toHost) {
            JCudaDriver.cuMemcpyDtoH(RawPointers.host(host.address()), buffer, length);
        } else {
            JCudaDriver.cuMemcpyHtoD(buffer, RawPointers.host(host.address()), length);
        }
    }

    @Override
    public void close() {
        runtime.makeCurrent();
        JCudaDriver.cuStreamDestroy(stream);
        JCudaDriver.cuMemFree(buffer);
    }
}
