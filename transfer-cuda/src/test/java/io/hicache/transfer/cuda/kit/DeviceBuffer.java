package io.hicache.transfer.cuda.kit;

import io.hicache.cuda.DevicePointer;
import java.lang.foreign.MemorySegment;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * Device memory for the cuda-ipc kit and bench: one {@code cuMemAlloc} on a device, in its primary context, with
 * uploads and downloads of host memory. Each call makes the context current on the calling thread. Not thread-safe
 * for overlapping copies; the opener closes it (frees the memory).
 */
public final class DeviceBuffer implements AutoCloseable {
    private final CUcontext context = new CUcontext();
    private final DevicePointer pointer = new DevicePointer();
    private final long bytes;

    private DeviceBuffer(int ordinal, long bytes) {
        CUdevice device = new CUdevice();
        JCudaDriver.setExceptionsEnabled(true);
        JCudaDriver.cuInit(0);
        JCudaDriver.cuDeviceGet(device, ordinal);
        JCudaDriver.cuDevicePrimaryCtxRetain(context, device);
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuMemAlloc(pointer, bytes);
        this.bytes = bytes;
    }

    /** Allocates {@code bytes} on device {@code ordinal}. */
    public static DeviceBuffer allocate(int ordinal, long bytes) {
        return new DeviceBuffer(ordinal, bytes);
    }

    /** The device address. */
    public long address() {
        return pointer.address();
    }

    public long bytes() {
        return bytes;
    }

    /** Copies {@code host} (native memory) to offset {@code offset}, synchronously. */
    public void upload(MemorySegment host, long offset) {
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuMemcpyHtoD(pointer.withByteOffset(offset), Pointer.to(host.asByteBuffer()), host.byteSize());
    }

    /** Copies {@code host.byteSize()} bytes from offset {@code offset} into {@code host}, synchronously. */
    public void download(MemorySegment host, long offset) {
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuMemcpyDtoH(Pointer.to(host.asByteBuffer()), pointer.withByteOffset(offset), host.byteSize());
    }

    /**
     * {@code length} bytes from {@code from} (offset here) to {@code to} (offset there) in one {@code cuMemcpyPeer}.
     * Between two devices it first enables peer access both ways (once; the driver answers that it is already on
     * after): without it the driver stages the copy through host memory, which is not the GPU-to-GPU reference.
     */
    public void copyTo(DeviceBuffer to, long toOffset, long fromOffset, long length) {
        if (!to.context.equals(context)) {
            enablePeerAccess(context, to.context);
            enablePeerAccess(to.context, context);
        }
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuMemcpyPeer(
                to.pointer.withByteOffset(toOffset), to.context, pointer.withByteOffset(fromOffset), context, length);
    }

    private static void enablePeerAccess(CUcontext from, CUcontext to) {
        JCudaDriver.cuCtxSetCurrent(from);
        try {
            JCudaDriver.cuCtxEnablePeerAccess(to, 0);
        } catch (jcuda.CudaException e) {
            if (!e.getMessage().contains(CUresult.stringFor(CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED))) {
                throw e;
            }
        }
    }

    /** Waits for everything queued in the context. */
    public void synchronize() {
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuCtxSynchronize();
    }

    @Override
    public void close() {
        JCudaDriver.cuCtxSetCurrent(context);
        JCudaDriver.cuMemFree(pointer);
    }
}
