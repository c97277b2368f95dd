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
     * Registers host memory for direct device access (the host slab); the caller closes the registration
     * before it frees or unmaps the memory.
     */
    HostRegistration registerHost(MemorySegment memory);

    @Override
    void close();
}
