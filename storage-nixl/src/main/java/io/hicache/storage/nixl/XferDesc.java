package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryType;

/**
 * A transfer descriptor: {@code length} bytes at {@code offset} of a registered {@link Region}, NIXL's
 * {@code (addr, len, devId)} in a form that cannot point outside what was registered. Made by
 * {@link Region#slice(long, long)}. Immutable.
 */
record XferDesc(Region region, long offset, long length) {
    /** The memory type of its region. */
    public MemoryType type() {
        return region.type();
    }
}
