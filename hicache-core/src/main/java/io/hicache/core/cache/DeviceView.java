package io.hicache.core.cache;

import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.KvPool;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * The one way to the cache's device pool (L1): its pages one at a time, where an engine's kernels find its K and V,
 * and the pool itself for a transfer. Allocation, eviction and the batched copies stay the cache's own; page indices
 * are those a request's {@link CacheRequest#prefixPages()} and {@link CacheRequest#allocate(int)} give.
 *
 * <p>Thread-safe. Page reads and writes are synchronous and not ordered with the cache's copies in flight: the caller
 * reads or writes only pages its request owns (allocated or pinned by it). Valid until the cache closes; the cache
 * owns the pool and everything this returns.
 */
public interface DeviceView {
    /** Pages in the device pool. */
    int pages();

    /** Bytes of one page in the flat order of {@link HiCache#format()}. */
    long pageBytes();

    /** Writes device page {@code page} from {@code flat} (at least {@link #pageBytes()} bytes, the format's flat order). */
    void writePage(int page, MemorySegment flat);

    /** Reads device page {@code page} into {@code flat} (at least {@link #pageBytes()} bytes). */
    void readPage(int page, MemorySegment flat);

    /**
     * Where the pool's K and V live, per layer (addresses, strides, page size, dtype): what an engine hands to its
     * attention kernels.
     */
    DeviceBuffers buffers();

    /**
     * The pool's memory where this process's host code can address it, laid out as
     * {@link io.hicache.core.memory.DeviceLayout} says: on the emulated device, so that a transport (prefill/decode
     * disaggregation) can register it and move pages straight in and out; empty on CUDA, whose pool only a device-side
     * transport reaches.
     */
    Optional<MemorySegment> hostVisibleMemory();

    /**
     * The pool itself, for a transfer that copies the pages of requests the caller holds open (a staged prefill/decode
     * handoff gathers and scatters them layer by layer). The caller never closes it, allocates or frees its pages, or
     * touches pages no open request of its own holds.
     */
    KvPool pool();
}
