package io.hicache.core.memory;

import org.jspecify.annotations.Nullable;

/**
 * Hands out a KV pool's pages. The cache takes device pages through this interface and gives them back through it,
 * so an engine that keeps its own page table (a token-to-slot allocator, as SGLang's and vLLM's schedulers have) can
 * implement it and give it to the cache ({@code HiCacheBuilder.pageAllocator}); otherwise the pool's own
 * {@link PageAllocator} serves.
 *
 * <p>Implementations must be thread-safe: the cache calls under its lock, the engine from its own threads.
 */
public interface DevicePageAllocator {
    /** Pages it manages: page indices are {@code [0, capacity)}. */
    int capacity();

    /** Pages free now. */
    int available();

    /** {@code count} free pages, now allocated, or {@code null} (and nothing allocated) if fewer are free. */
    int @Nullable [] tryAllocate(int count);

    /** Gives {@code pages} back; each must be allocated. */
    void free(int... pages);

    /** Whether {@code page} is allocated now (the cache's consistency check asks). */
    boolean isAllocated(int page);
}
