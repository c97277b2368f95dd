package io.hicache.core.memory;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import java.util.BitSet;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Hands out page indices {@code [0, capacity)} of a pool: device pages of a KV pool, slots of the host slab.
 * Pages come back in any order and need not be adjacent; scattered pages are the normal case.
 *
 * <p>Thread-safe (one lock; allocation is a stack pop, so it is short). Freeing a page that is not allocated
 * is a bug in the caller and fails loudly rather than corrupting the free list.
 */
public final class PageAllocator implements DevicePageAllocator {
    private final String name;
    private final int capacity;
    private final int[] freeStack;
    private final BitSet allocated;
    private int freeCount;

    /** An allocator of {@code capacity} pages, all free; {@code name} appears in its errors. */
    public PageAllocator(String name, int capacity) {
        this.name = Checks.checkNotNull(name, "name");
        this.capacity = Checks.checkPositive(capacity, "capacity");
        this.freeStack = new int[capacity];
        this.allocated = new BitSet(capacity);
        // Pop order 0, 1, 2, ... for a fresh pool: easy to read in logs and tests.
        for (int i = 0; i < capacity; i++) {
            freeStack[i] = capacity - 1 - i;
        }
        this.freeCount = capacity;
    }

    /** An allocator of {@code capacity} pages where only the pages in {@code inUse} start allocated. */
    public static PageAllocator withAllocated(String name, int capacity, BitSet inUse) {
        PageAllocator a = new PageAllocator(name, capacity);
        synchronized (a) {
            a.freeCount = 0;
            for (int i = capacity - 1; i >= 0; i--) {
                if (inUse.get(i)) {
                    a.allocated.set(i);
                } else {
                    a.freeStack[a.freeCount++] = i;
                }
            }
        }
        return a;
    }

    /** Total pages. */
    @Override
    public int capacity() {
        return capacity;
    }

    /** Pages free now. */
    @Override
    public synchronized int available() {
        return freeCount;
    }

    /** {@code count} free pages, now allocated, or {@code null} (and nothing allocated) if fewer are free. */
    @Override
    public synchronized int @Nullable [] tryAllocate(int count) {
        Checks.checkNotNegative(count, "count");
        if (count > freeCount) {
            return null;
        }
        int[] pages = new int[count];
        for (int i = 0; i < count; i++) {
            int page = freeStack[--freeCount];
            allocated.set(page);
            pages[i] = page;
        }
        return pages;
    }

    /**
     * {@code count} free pages, now allocated.
     *
     * @throws HiCacheException {@link ErrorCode#PAGES_EXHAUSTED} naming how many were asked for and free
     */
    public int[] allocate(int count) {
        int[] pages = tryAllocate(count);
        if (pages == null) {
            throw new HiCacheException(
                    ErrorCode.PAGES_EXHAUSTED,
                    name + ": asked for " + count + " pages, " + available() + " of " + capacity + " are free");
        }
        return pages;
    }

    /**
     * Returns pages to the pool. All are checked before any is freed, so a bad call changes nothing.
     *
     * @throws IllegalArgumentException for a page out of range
     * @throws IllegalStateException    for a page that is not allocated (a double free), or listed twice
     */
    @Override
    public synchronized void free(int... pages) {
        BitSet seen = new BitSet();
        for (int page : pages) {
            Checks.requireArgument(
                    page >= 0 && page < capacity, "%s: page %d is out of range [0, %d)", name, page, capacity);
            Checks.requireState(allocated.get(page), "%s: page %d is already free (double free)", name, page);
            Checks.requireState(!seen.get(page), "%s: page %d is listed twice in one free", name, page);
            seen.set(page);
        }
        for (int page : pages) {
            allocated.clear(page);
            freeStack[freeCount++] = page;
        }
    }

    /** True if {@code page} is allocated now. */
    @Override
    public synchronized boolean isAllocated(int page) {
        Objects.checkIndex(page, capacity);
        return allocated.get(page);
    }

    @Override
    public synchronized String toString() {
        return name + "[" + freeCount + " of " + capacity + " pages free]";
    }
}
