package io.hicache.transfer.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * A JCuda device pointer by plain address, both ways: one at an address the transfer engine names, or one the driver
 * fills whose address is then read. JCuda keeps both behind protected members; this subclass bridges them. Not
 * thread-safe until filled; immutable after.
 */
final class DevicePointer extends CUdeviceptr {
    private final long at;

    /** A pointer for the driver to fill ({@code cuIpcOpenMemHandle}, {@code cuMemGetAddressRange}). */
    DevicePointer() {
        this.at = 0;
    }

    private DevicePointer(long address) {
        // JCuda adds the byte offset to the (null) pointer it wraps when it passes this to the driver
        super(new CUdeviceptr(), address);
        this.at = address;
    }

    /** The device pointer at {@code address}. */
    static DevicePointer at(long address) {
        return new DevicePointer(address);
    }

    /** The address: given, or filled by the driver. */
    long address() {
        return at != 0 ? at : getNativePointer();
    }
}
