package io.hicache.core.store;

import io.hicache.core.key.PageHash;

/**
 * Told of pages a store removed on its own, not asked to by a delete or clear: evicted for capacity, or found damaged
 * and removed ({@link PageStore#onDropped}). The daemon turns them into KV events, so that a router does not send
 * requests after KV that is gone (docs/kv-events.md).
 *
 * <p>Called on the store's own threads, possibly many at once: implementations must be thread-safe, quick, must not
 * block, and must not call the store.
 */
@FunctionalInterface
public interface DroppedPages {
    /** Tells nobody. */
    DroppedPages NONE = (namespaceId, hash) -> {};

    /** The page {@code hash} of the namespace whose id is {@code namespaceId} is no longer stored. */
    void dropped(String namespaceId, PageHash hash);
}
