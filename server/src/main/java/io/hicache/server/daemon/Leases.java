package io.hicache.server.daemon;

import io.netty.channel.Channel;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Leases on slab pages for same-host clients, which read the pages by mapping the slab file: while a lease lives its
 * pages are pinned (neither evicted nor their blocks reused). A lease ends when its holder releases it, when it
 * expires, or when its connection closes. Thread-safe.
 */
final class Leases {
    private record Lease(Channel owner, List<SlabCache.Entry> entries, long expiresNanos) {
    }

    private final SlabCache cache;
    private final Map<Long, Lease> leases = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong();

    Leases(SlabCache cache) {
        this.cache = cache;
    }

    /** Takes ownership of the pins on {@code entries} (the non-null ones) for {@code millis}. */
    long grant(Channel owner, List<SlabCache.Entry> entries, long millis) {
        long id = ids.incrementAndGet();
        leases.put(id, new Lease(owner, entries, System.nanoTime() + millis * 1_000_000));
        return id;
    }

    /** Ends lease {@code id} if {@code owner} holds it; false for an unknown or foreign lease. */
    boolean release(Channel owner, long id) {
        Lease l = leases.get(id);
        if (l == null || l.owner != owner || !leases.remove(id, l)) {
            return false;
        }
        unpin(l);
        return true;
    }

    /** Ends the leases of a closed connection. */
    void releaseAll(Channel owner) {
        leases.forEach((id, l) -> {
            if (l.owner == owner && leases.remove(id, l)) {
                unpin(l);
            }
        });
    }

    /** Ends expired leases; the server runs this every second. */
    void expire() {
        long now = System.nanoTime();
        leases.forEach((id, l) -> {
            if (now - l.expiresNanos > 0 && leases.remove(id, l)) {
                unpin(l);
            }
        });
    }

    int active() {
        return leases.size();
    }

    private void unpin(Lease l) {
        for (SlabCache.Entry e : l.entries) {
            if (e != null) {
                cache.unpin(e);
            }
        }
    }
}
