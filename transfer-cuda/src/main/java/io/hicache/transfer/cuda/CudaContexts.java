package io.hicache.transfer.cuda;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.cuda.DevicePointer;
import java.lang.reflect.Field;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.CUpointer_attribute;
import jcuda.driver.JCudaDriver;

/**
 * The CUDA driver as the cuda-ipc transport uses it: the primary context of each device it touches (retained once,
 * released on close, shared with every other library in the process), which device an address belongs to, PCI bus
 * ids, and IPC handles as text for a segment descriptor.
 *
 * <p>Thread-safe. Owned by one transport, which closes it after its links.
 */
final class CudaContexts implements AutoCloseable {
    /** JCuda keeps an IPC handle's 64 bytes in a private field with no accessor; the pinned 12.6.0 has it so. */
    private static final Field HANDLE_BYTES = handleField();

    private final Map<Integer, CUcontext> contexts = new ConcurrentHashMap<>();
    private final Map<Integer, CUdevice> devices = new ConcurrentHashMap<>();

    private static Field handleField() {
        try {
            Field f = CUipcMemHandle.class.getDeclaredField("reserved");
            f.setAccessible(true);
            return f;
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new ExceptionInInitializerError("this JCuda has no CUipcMemHandle.reserved: " + e);
        }
    }

    /** Makes device {@code ordinal}'s primary context current on the calling thread (retaining it the first time). */
    void makeCurrent(int ordinal) {
        JCudaDriver.cuCtxSetCurrent(context(ordinal));
    }

    /** Device {@code ordinal}'s primary context, retained the first time (for a thread that makes it current itself). */
    CUcontext context(int ordinal) {
        return contexts.computeIfAbsent(ordinal, o -> {
            CUcontext context = new CUcontext();
            JCudaDriver.cuDevicePrimaryCtxRetain(context, device(o));
            return context;
        });
    }

    private CUdevice device(int ordinal) {
        return devices.computeIfAbsent(ordinal, o -> {
            CUdevice d = new CUdevice();
            JCudaDriver.cuDeviceGet(d, o);
            return d;
        });
    }

    /**
     * The ordinal of the device that {@code address} belongs to.
     *
     * @throws HiCacheException {@link ErrorCode#TRANSFER_UNAVAILABLE} when it is not device memory CUDA knows
     */
    int deviceOf(long address) {
        int[] ordinal = {-1};
        try {
            JCudaDriver.cuPointerGetAttribute(
                    Pointer.to(ordinal),
                    CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    DevicePointer.at(address));
        } catch (CudaException e) {
            throw new HiCacheException(
                    ErrorCode.TRANSFER_UNAVAILABLE,
                    "0x" + Long.toHexString(address) + " is not CUDA device memory: " + e.getMessage(),
                    e);
        }
        return ordinal[0];
    }

    /**
     * The allocation that holds {@code address} on device {@code ordinal}: {base, limit} (what an IPC handle covers).
     */
    long[] allocationOf(int ordinal, long address) {
        makeCurrent(ordinal);
        DevicePointer base = new DevicePointer();
        long[] size = {0};
        JCudaDriver.cuMemGetAddressRange(base, size, DevicePointer.at(address));
        return new long[] {base.address(), base.address() + size[0]};
    }

    /** The PCI bus id of device {@code ordinal}, the same in every process of the host. */
    String busId(int ordinal) {
        String[] id = {null};
        JCudaDriver.cuDeviceGetPCIBusId(id, 64, device(ordinal));
        return id[0].trim();
    }

    /** The ordinal of the device at PCI bus id {@code busId}. */
    int ordinalOf(String busId) {
        int count = deviceCount();
        for (int o = 0; o < count; o++) {
            if (busId(o).equalsIgnoreCase(busId)) {
                return o;
            }
        }
        throw new HiCacheException(ErrorCode.TRANSFER_UNAVAILABLE, "no device at PCI bus id " + busId);
    }

    int deviceCount() {
        int[] count = {0};
        JCudaDriver.cuDeviceGetCount(count);
        return count[0];
    }

    /** Whether device {@code from} can reach {@code to}'s memory (the same device, or peer access). */
    boolean canAccess(int from, int to) {
        if (from == to) {
            return true;
        }
        int[] can = {0};
        JCudaDriver.cuDeviceCanAccessPeer(can, device(from), device(to));
        return can[0] != 0;
    }

    /** The handle's bytes as hexadecimal text. */
    static String encode(CUipcMemHandle handle) {
        try {
            return HexFormat.of().formatHex((byte[]) HANDLE_BYTES.get(handle));
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A handle from {@link #encode}'s text. */
    static CUipcMemHandle decode(String hex) {
        byte[] bytes = HexFormat.of().parseHex(hex);
        CUipcMemHandle handle = new CUipcMemHandle();
        try {
            byte[] inside = (byte[]) HANDLE_BYTES.get(handle);
            if (inside.length != bytes.length) {
                throw new IllegalArgumentException(
                        "an IPC handle has " + inside.length + " bytes, got " + bytes.length);
            }
            System.arraycopy(bytes, 0, inside, 0, bytes.length);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
        return handle;
    }

    /** Releases the primary contexts this retained. */
    @Override
    public void close() {
        for (Map.Entry<Integer, CUcontext> e : contexts.entrySet()) {
            try {
                JCudaDriver.cuDevicePrimaryCtxRelease(device(e.getKey()));
            } catch (CudaException ignored) {
                // the process is ending its use of the device; nothing more to release
            }
        }
        contexts.clear();
    }
}
