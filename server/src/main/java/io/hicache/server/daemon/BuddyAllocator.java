package io.hicache.server.daemon;

import io.hicache.core.util.Checks;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * A buddy allocator of contiguous byte ranges in a slab: blocks of {@code minBlock << order} bytes, split in halves
 * on demand and merged with their buddy when both are free. Contiguous ranges are what a page needs, to go to a store
 * or a client in one piece; the cost is up to half a block of slack per page. Thread-safe (synchronized).
 */
final class BuddyAllocator {
    private final long minBlock;
    private final int maxOrder;
    private final List<TreeSet<Long>> free = new ArrayList<>();
    private long freeBytes;

    /** Covers {@code bytes} (a multiple of the largest block) with top-level blocks of {@code minBlock << maxOrder}. */
    BuddyAllocator(long bytes, long minBlock, int maxOrder) {
        Checks.requireArgument(Long.bitCount(minBlock) == 1, "minBlock must be a power of two, was %d", minBlock);
        long top = minBlock << maxOrder;
        Checks.requireArgument(
                bytes >= top && bytes % top == 0, "%d bytes is not a multiple of the largest block %d", bytes, top);
        this.minBlock = minBlock;
        this.maxOrder = maxOrder;
        for (int o = 0; o <= maxOrder; o++) {
            free.add(new TreeSet<>());
        }
        for (long at = 0; at < bytes; at += top) {
            free.get(maxOrder).add(at);
        }
        this.freeBytes = bytes;
    }

    /** The order of the smallest block that holds {@code bytes}, or -1 if none does. */
    int orderFor(long bytes) {
        int order = 0;
        while ((minBlock << order) < bytes) {
            if (++order > maxOrder) {
                return -1;
            }
        }
        return order;
    }

    long blockBytes(int order) {
        return minBlock << order;
    }

    /** A free block of {@code order}'s offset, or -1 when none is left. */
    synchronized long allocate(int order) {
        int o = order;
        while (o <= maxOrder && free.get(o).isEmpty()) {
            o++;
        }
        if (o > maxOrder) {
            return -1;
        }
        long at = free.get(o).pollFirst();
        while (o > order) {
            o--;
            free.get(o).add(at + (minBlock << o)); // the upper half stays free
        }
        freeBytes -= minBlock << order;
        return at;
    }

    /**
     * Gives back the block of {@code order} at {@code at}, merging it with its free buddies.
     *
     * @throws IllegalStateException for a block that is free already (a second free would hand it to two pages)
     */
    synchronized void free(long at, int order) {
        Checks.requireState(
                !free.get(order).contains(at), "the slab block of order %d at %d is freed twice", order, at);
        freeBytes += minBlock << order;
        long block = at;
        int o = order;
        while (o < maxOrder) {
            long buddy = block ^ (minBlock << o);
            if (!free.get(o).remove(buddy)) {
                break;
            }
            block = Math.min(block, buddy);
            o++;
        }
        free.get(o).add(block);
    }

    /**
     * Takes the block of {@code order} at {@code at} (a warm restart puts each kept page back where it was): the free
     * block holding it is split down to it. False when no free block holds it (the index named overlapping pages).
     */
    synchronized boolean allocateAt(long at, int order) {
        if (order < 0 || order > maxOrder || at < 0 || at % (minBlock << order) != 0) {
            return false;
        }
        for (int o = order; o <= maxOrder; o++) {
            long holder = at & ~((minBlock << o) - 1);
            if (free.get(o).remove(holder)) {
                while (o > order) {
                    o--;
                    long half = minBlock << o;
                    // the half that does not hold the block stays free
                    free.get(o).add((at & half) == 0 ? holder + half : holder);
                    holder = (at & half) == 0 ? holder : holder + half;
                }
                freeBytes -= minBlock << order;
                return true;
            }
        }
        return false;
    }

    synchronized long freeBytes() {
        return freeBytes;
    }
}
