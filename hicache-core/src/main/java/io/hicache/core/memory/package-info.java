/**
 * Memory tiers: the device runtime SPI (L1 KV pools and copies between device and host), host slabs and
 * their layouts, and page allocators. Implementations: {@code emulated} here, {@code cuda} on a GPU; the host
 * page pool (L2) is in {@code host}.
 */
package io.hicache.core.memory;
