/**
 * What a store holds, for eviction and usage figures: {@link io.hicache.core.usage.PageUsageIndex}, one index of
 * stored pages in recency or insertion order, with pins, claims, flags and byte counts, in total and per namespace.
 * The file, RocksDB and NIXL stores (through their capacity gate) and the daemon's slab keep their pages in it. It
 * depends on nothing else of HiCache but the argument checks.
 */
package io.hicache.core.usage;
