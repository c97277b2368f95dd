package io.hicache.server.daemon;

import io.hicache.core.key.StoreKey;

/**
 * Room in the slab for one page: a block charged to the page's namespace, nobody's page yet. A PUT's room is filled
 * from the request's body at once; a RESERVE's is filled by a same-host client, then committed or abandoned
 * ({@link Leases}). Whoever holds a room makes it a page ({@link SlabWrites#commit}) or frees it
 * ({@link SlabSpace#free(Room)}), exactly once. Immutable.
 *
 * @param key    the page it is for
 * @param offset the block's offset in the slab
 * @param order  the block's buddy order
 * @param length the page's length, at most the block's
 */
record Room(StoreKey key, long offset, int order, int length) implements SlabWrites.RoomOutcome {}
