package io.hicache.core.memory;

import io.hicache.core.page.PageFormat;
import java.lang.foreign.MemorySegment;

/**
 * A device that holds KV pools (L1): a CUDA GPU, or an emulated device in host memory that runs the same code
 * paths on any machine. Found by name with {@link DeviceRuntimes}.
 *
 * <p>Thread-safe. The opener closes it; closing it closes every pool it created and stops its threads.
 */
public interface DeviceRuntime extends AutoCloseable {
    /** The runtime's name: {@code emulated}, {@code cuda}. */
    String name();

    /** Which device this is, and its memory now. */
    DeviceInfo info();

    /**
     * Allocates a KV pool of {@code pages} pages of {@code format} in device memory.
     *
     * @throws io.hicache.core.HiCacheException {@link io.hicache.core.ErrorCode#DEVICE_OUT_OF_MEMORY} when it
     *     does not fit, naming the sizes
     */
    KvPool createPool(PageFormat format, int pages);

    /**
     * A KV pool of {@code pages} pages of {@code format} over device memory the engine allocated: {@code bytes} at
     * {@code address} (a {@code CUdeviceptr} value on CUDA; a host address on the emulated device), laid out as
     * {@link DeviceLayout} says, so the engine's attention kernels and the cache's copies see the same pages. The pool
     * adopts the memory and does not own it: closing the pool does not free it, and the engine must keep it allocated
     * until the pool is closed.
     *
     * @throws IllegalArgumentException when {@code bytes} is smaller than the pool, or the address is 0 or not
     *     aligned to 256 bytes (what CUDA's allocations give)
     */
    KvPool adoptPool(PageFormat format, int pages, long address, long bytes);

    /**
     * Registers host memory for direct device access (the host slab); the caller closes the registration
     * before it frees or unmaps the memory.
     */
    HostRegistration registerHost(MemorySegment memory);

    @Override
    void close();
}
