package io.hicache.transfer.spi;

import java.lang.foreign.MemorySegment;

/**
 * A region of this engine's memory as a transport sees it: what it serves peers' reads from and their writes into,
 * and what it registers with its hardware ({@link Transport#register}).
 *
 * <p>Thread-safe. Owned by the engine: the memory is valid from {@link Transport#register} until
 * {@link Transport#deregister} returns. A transport holds {@link #acquire()} while bytes of a peer's request move, so
 * that unregistering waits for them.
 */
public interface RegisteredRegion {
    /** The region's name in its segment. */
    String name();

    /** The number peers address it by. */
    int id();

    /**
     * Its memory. For a {@link MemoryKind#DEVICE} region only the address and length mean anything: the CPU must not
     * read or write it.
     */
    MemorySegment memory();

    /** Where its bytes live. */
    MemoryKind kind();

    /** Whether [{@code offset}, {@code offset + length}) lies inside the region. */
    default boolean contains(long offset, long length) {
        return offset >= 0 && length >= 0 && offset <= memory().byteSize() - length;
    }

    /**
     * Marks a peer's request as moving the region's bytes, unless the region is being unregistered.
     *
     * @return false when it is (the request must be refused)
     */
    boolean acquire();

    /** Ends what {@link #acquire()} began. */
    void release();
}
