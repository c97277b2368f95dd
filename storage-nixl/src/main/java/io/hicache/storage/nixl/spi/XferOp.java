package io.hicache.storage.nixl.spi;

/** The direction of a transfer, seen from the local memory, as in NIXL. */
public enum XferOp {
    /** Storage (or remote) to local memory. */
    READ,
    /** Local memory to storage (or remote). */
    WRITE
}
