package io.hicache.core.events;

import io.hicache.core.util.Checks;

/**
 * HiCache's addition to an event (docs/kv-events.md, "Tiers and namespaces"): which tier of which publisher the pages
 * are in or left, the L3 store by name, and the pages' namespace, so that a router can tell a daemon's tiers and
 * namespaces apart where SGLang's medium alone cannot. Sent as one trailing field, a map, which SGLang's decoders
 * (msgspec {@code array_like} structs) skip. Immutable.
 *
 * @param tier        {@code "slab"} (the daemon's host tier) or {@code "l3"}
 * @param store       the L3 store's name ({@code file}, {@code s3}, ...), empty for the slab
 * @param namespaceId the pages' namespace id (32 hex digits; docs/keys.md)
 */
public record Placement(String tier, String store, String namespaceId) {
    public Placement {
        Checks.checkNotNull(tier, "tier");
        Checks.checkNotNull(store, "store");
        Checks.checkNotNull(namespaceId, "namespaceId");
    }
}
