package io.hicache.transfer.spi;

/**
 * Where a region's bytes live, which decides what may touch them: host memory any transport can read and write with
 * the CPU; device memory (a GPU's, at a unified virtual address) only a transport that says it
 * {@link Transport#moves moves} it, never the CPU.
 */
public enum MemoryKind {
    /** Host memory: the CPU may read and write it. */
    HOST,
    /** Device memory: its address is a GPU address, which the CPU must not dereference. */
    DEVICE
}
