/**
 * The page store SPI (L3): {@link io.hicache.core.store.PageStore} and its provider, found by name with
 * {@link java.util.ServiceLoader}; batches, per-page outcomes, capabilities and statistics.
 */
package io.hicache.core.store;
