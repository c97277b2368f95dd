package io.hicache.cuda;

import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * JCuda pointers by address. HiCache's host memory is FFM memory with a plain address, and kernels take plain
 * 64-bit addresses; JCuda's protected constructors and accessor let this class bridge the two. Stateless.
 */
final class RawPointers {
    private RawPointers() {
    }

    /** A host pointer at {@code address}. */
    static Pointer host(long address) {
        return new HostAddress(address);
    }

    /** A device allocation whose address can be read after {@code cuMemAlloc} fills it. */
    static DeviceAllocation newDeviceAllocation() {
        return new DeviceAllocation();
    }

    private static final class HostAddress extends Pointer {
        HostAddress(long address) {
            super(address);
        }
    }

    /** A {@link CUdeviceptr} that tells its address. */
    static final class DeviceAllocation extends CUdeviceptr {
        /** The device address, valid once {@code cuMemAlloc} has filled this pointer. */
        long address() {
            return getNativePointer();
        }
    }
}
