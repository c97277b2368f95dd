package io.hicache.storage.nixl.spi;

/** How a registered file may be used, like the modes of NIXL's {@code "modes:path"} file registration. */
public enum FileMode {
    /** READ transfers from the file. */
    READ,
    /** WRITE transfers into the file, which must exist unless {@link #CREATE} is given too. */
    WRITE,
    /** WRITE transfers create the file (and write into it). */
    CREATE,
    /** I/O bypasses the page cache ({@code O_DIRECT}); unaligned parts go through aligned bounce buffers. */
    DIRECT,
    /**
     * Not in NIXL: each WRITE transfer goes to a temporary file that replaces the file only when every descriptor
     * has landed, so a transfer that fails or is cancelled halfway leaves the old file (or none) and never a half
     * one; the file then has exactly the region's length.
     */
    ATOMIC
}
