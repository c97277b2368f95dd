/**
 * The HiCache daemon ({@link io.hicache.server.daemon.HiCacheServer}, started by {@code hicache serve}): a host slab
 * on tmpfs in front of any L3 page store, served over the protocol of {@link io.hicache.storage.remote.protocol}, with
 * write-behind, promotion, eviction, namespace quotas, same-host leases, Prometheus metrics and graceful shutdown.
 * Its settings are {@link io.hicache.server.daemon.ServerConfig}; docs/architecture.md describes the threads.
 */
package io.hicache.server.daemon;
