package io.hicache.server.daemon;

import java.util.concurrent.atomic.LongAdder;

/** The host tier's counters, read by {@link ServerMetrics} at each scrape. Thread-safe. */
final class TierCounters {
    /** Pages served from the host slab. */
    final LongAdder hostHits = new LongAdder();
    /** Pages served from the L3 store (and promoted where there was room). */
    final LongAdder storeHits = new LongAdder();
    /** Pages found in no tier. */
    final LongAdder misses = new LongAdder();
    /** Pages evicted from the slab. */
    final LongAdder evictedPages = new LongAdder();
    /** Puts and reservations refused: too large, over quota, or no room by the deadline. */
    final LongAdder rejectedPuts = new LongAdder();
    /**
     * Page bytes same-host clients read from the slab through leases, and wrote into it through reservations: bytes
     * that never cross the socket, so the received and sent counters do not see them.
     */
    final LongAdder sameHostReadBytes = new LongAdder();

    final LongAdder sameHostWrittenBytes = new LongAdder();
    /** PUT pages whose bodies were received straight into their room in the slab ({@link PutLander}) and stored. */
    final LongAdder landedPages = new LongAdder();
    /** Of landed pages' bytes, those the socket read straight into their room (the rest came with a table, copied). */
    final LongAdder landedInPlaceBytes = new LongAdder();
    /** PUT pages stored with the client's CRC-32C, their bodies unchecked (the flag {@code UNCHECKED}). */
    final LongAdder uncheckedPages = new LongAdder();
    /**
     * Pages of the slab found damaged (bytes failing their CRC-32C) by the daemon's own checks: before a write-behind,
     * converting a checksum for a CRC-32 connection, on a warm restart. Each was removed.
     */
    final LongAdder corruptPages = new LongAdder();
}
