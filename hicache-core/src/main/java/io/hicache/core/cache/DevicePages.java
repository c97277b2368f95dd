package io.hicache.core.cache;

import java.lang.foreign.MemorySegment;

/**
 * A narrow view of the cache's device pool: single pages in and out, in the flat order of
 * {@link HiCache#format()}, for tests, verification and the hand-over of single pages. Allocation, eviction and the
 * batched copies stay the cache's own; the pool itself is not handed out.
 *
 * <p>Thread-safe. Page reads and writes are synchronous and not ordered with the cache's copies in flight: the
 * caller reads or writes only pages its request owns (allocated or pinned by it). Valid until the cache closes.
 */
public interface DevicePages {
    /** Pages in the device pool. */
    int capacity();

    /** Bytes of one page in the flat order. */
    long pageBytes();

    /** Writes device page {@code page} from {@code flat} (at least {@link #pageBytes()} bytes). */
    void writePage(int page, MemorySegment flat);

    /** Reads device page {@code page} into {@code flat} (at least {@link #pageBytes()} bytes). */
    void readPage(int page, MemorySegment flat);
}
