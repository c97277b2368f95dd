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

    /** A device allocation the engine made, at {@code address}: the pool adopts it and never frees it. */
    static DeviceAllocation adopted(long address) {
        return new DeviceAllocation(address);
    }

    /**
     * A {@link CUdeviceptr} that tells its address: one {@code cuMemAlloc} fills, or one at an address the engine
     * allocated (held as a byte offset from null, which JCuda adds to the pointer it passes to the driver).
     */
    static final class DeviceAllocation extends CUdeviceptr {
        private final long adoptedAddress;

        DeviceAllocation() {
            this.adoptedAddress = 0;
        }

        private DeviceAllocation(long address) {
            super(new CUdeviceptr(), address);
            this.adoptedAddress = address;
        }

        /** Whether the engine allocated it (the pool must not free it). */
        boolean adopted() {
            return adoptedAddress != 0;
        }

        /** The device address, valid once {@code cuMemAlloc} has filled this pointer (or given when adopted). */
        long address() {
            return adoptedAddress != 0 ? adoptedAddress : getNativePointer();
        }
    }
}
