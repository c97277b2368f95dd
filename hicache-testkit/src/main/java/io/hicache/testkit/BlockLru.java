package io.hicache.testkit;

import io.hicache.core.util.Checks;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The oracle of a trace's hit rates: plain block-level LRU. A request's blocks are hits up to its first miss; after
 * the lookup every block of the request is touched or inserted in order, the least recently used going when the
 * capacity is full. Not thread-safe.
 */
public final class BlockLru {
    private final long capacityBlocks;
    private final LinkedHashMap<Integer, Boolean> blocks;
    private long lookedUp;
    private long hits;

    /** An LRU of {@code capacityBlocks} blocks ({@link Long#MAX_VALUE}: unbounded). */
    public BlockLru(long capacityBlocks) {
        Checks.checkPositive(capacityBlocks, "capacityBlocks");
        this.capacityBlocks = capacityBlocks;
        this.blocks = new LinkedHashMap<>(1 << 16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Integer, Boolean> eldest) {
                return size() > BlockLru.this.capacityBlocks;
            }
        };
    }

    /** Looks {@code request} up (hits up to its first miss), then touches or inserts each of its blocks in order. */
    public int serve(int[] request) {
        int hit = 0;
        while (hit < request.length && blocks.containsKey(request[hit])) {
            hit++;
        }
        for (int b : request) {
            blocks.put(b, Boolean.TRUE); // a put of a present key is an access: it moves to the most recent end
        }
        lookedUp += request.length;
        hits += hit;
        return hit;
    }

    /** Blocks hit over blocks looked up so far. */
    public double hitRate() {
        return lookedUp == 0 ? 0 : hits / (double) lookedUp;
    }

    /** Blocks hit so far. */
    public long hits() {
        return hits;
    }

    /** Blocks looked up so far. */
    public long lookedUp() {
        return lookedUp;
    }
}
