package io.hicache.cuda;

import jcuda.Pointer;

/**
 * JCuda host pointers by address: HiCache's host memory is FFM memory with a plain address, and JCuda's protected
 * constructor lets this class bridge the two (device pointers: {@link DevicePointer}). Stateless.
 */
final class RawPointers {
    private RawPointers() {}

    /** A host pointer at {@code address}. */
    static Pointer host(long address) {
        return new HostAddress(address);
    }

    private static final class HostAddress extends Pointer {
        HostAddress(long address) {
            super(address);
        }
    }
}
