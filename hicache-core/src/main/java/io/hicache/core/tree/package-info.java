/**
 * The radix tree over token ids that knows, for every cached prefix, which tiers hold its pages: the device (L1),
 * the host pool (L2), both, or neither (then the node is gone). {@link io.hicache.core.tree.RadixTree} is a data
 * structure only: it decides and records, while the cache (io.hicache.core.cache) moves bytes and frees slots.
 *
 * <p>Internal to the core: not API (engines use {@code HiCache}); only the bench may use it, to measure the tree on
 * its own.
 */
package io.hicache.core.tree;
