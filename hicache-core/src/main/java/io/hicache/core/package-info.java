/**
 * HiCache core: the types every layer shares ({@link io.hicache.core.Deadline}, {@link io.hicache.core.ErrorCode},
 * {@link io.hicache.core.HiCacheException}). Packages inside the core, lowest first (a package uses only its own rank
 * or lower; the architecture test enforces it): {@code util}; this package; {@code config} and {@code page};
 * {@code key} and {@code usage}; {@code store}, {@code memory} and {@code tree} (internal); {@code store.memory},
 * {@code memory.emulated} and {@code memory.host}; {@code cache}. See docs/architecture.md.
 */
package io.hicache.core;
