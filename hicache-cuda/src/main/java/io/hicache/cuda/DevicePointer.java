package io.hicache.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * A JCuda device pointer by plain address, both ways: one the driver fills ({@code cuMemAlloc},
 * {@code cuIpcOpenMemHandle}, {@code cuMemGetAddressRange}) whose address is then read, or one at an address given
 * (memory the engine allocated, an address a transfer names), held as a byte offset from null, which JCuda adds to the
 * pointer it passes to the driver. JCuda keeps both behind protected members; this subclass bridges them. The one such
 * bridge for device pointers in the project.
 *
 * <p>Not thread-safe until filled; immutable after. It owns nothing: whoever allocated the memory frees it.
 */
public final class DevicePointer extends CUdeviceptr {
    private final long given;

    /** A pointer for the driver to fill. */
    public DevicePointer() {
        this.given = 0;
    }

    private DevicePointer(long address) {
        super(new CUdeviceptr(), address);
        this.given = address;
    }

    /** The device pointer at {@code address}. */
    public static DevicePointer at(long address) {
        return new DevicePointer(address);
    }

    /** Whether it was made at a given address rather than filled by the driver. */
    public boolean given() {
        return given != 0;
    }

    /** The address: given, or filled by the driver (0 before). */
    public long address() {
        return given != 0 ? given : getNativePointer();
    }
}
