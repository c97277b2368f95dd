/**
 * HiCache core: the types every layer shares ({@link io.hicache.core.Deadline}, {@link io.hicache.core.ErrorCode},
 * {@link io.hicache.core.HiCacheException}). Layers inside the core, lowest first: {@code page} (geometry and
 * layouts), {@code key} (page hashes, namespaces, store keys), {@code store} (the page store SPI),
 * {@code config} (settings). Lower layers never import upper ones.
 */
package io.hicache.core;
