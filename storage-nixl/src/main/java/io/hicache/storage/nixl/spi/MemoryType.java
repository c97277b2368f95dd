package io.hicache.storage.nixl.spi;

/**
 * Kinds of memory an agent registers, as NIXL names them. Local memory is {@link #DRAM} or {@link #VRAM}; storage
 * is {@link #FILE} or {@link #OBJ}. {@link #BLK} (raw block devices) is named for completeness: no plugin here
 * serves it.
 */
public enum MemoryType {
    /** Host memory: an off-heap {@link java.lang.foreign.MemorySegment}. */
    DRAM,
    /** Device memory: a pointer into a device runtime's pool. */
    VRAM,
    /** A block device. */
    BLK,
    /** An object in an object store, named by its key. */
    OBJ,
    /** A file, named by its path. */
    FILE;

    /** Whether transfers start from this kind of memory (the local side of a transfer). */
    public boolean isLocal() {
        return this == DRAM || this == VRAM;
    }
}
