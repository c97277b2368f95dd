package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The length of each value a RESP SET stored, so that a GET of a key the slab no longer holds can read it through L3
 * (a page store is read into memory of the page's exact length, which a Redis GET does not say). Bounded: past
 * {@link #MAX_ENTRIES} an arbitrary entry goes, and such a key then reads as a miss once the slab has evicted it. Not
 * kept across restarts: after one, RESP GETs see what the slab holds and what was SET since (docs/resp.md).
 *
 * <p>Thread-safe.
 */
final class RespLengths {
    static final int MAX_ENTRIES = 4_000_000;
    private final ConcurrentHashMap<StoreKey, Integer> lengths = new ConcurrentHashMap<>();

    void put(StoreKey key, int length) {
        if (lengths.size() >= MAX_ENTRIES) {
            var it = lengths.keySet().iterator();
            if (it.hasNext()) {
                lengths.remove(it.next());
            }
        }
        lengths.put(key, length);
    }

    /** The length stored, or 0 when none is known. */
    int get(StoreKey key) {
        return lengths.getOrDefault(key, 0);
    }

    void remove(StoreKey key) {
        lengths.remove(key);
    }

    void clear() {
        lengths.clear();
    }
}
