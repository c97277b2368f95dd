package io.hicache.core.cache;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHashes;

/**
 * A change in where pages are cached, for a router that places requests where their prefix is: pages stored in or
 * removed from a tier. Immutable.
 *
 * @param type      stored or removed
 * @param tier      where
 * @param namespace the pages' namespace
 * @param hashes    the pages' hashes, in prefix order
 */
public record KvEvent(Type type, Tier tier, Namespace namespace, PageHashes hashes) {
    /** What happened. */
    public enum Type { STORED, REMOVED }

    /** Where. */
    public enum Tier { DEVICE, HOST, STORE }
}
