/**
 * KV events in SGLang's format, for cache-aware routers (sgl-router, NVIDIA Dynamo): what the cache stored in or
 * removed from each tier ({@link io.hicache.core.events.BlockStored}, {@link io.hicache.core.events.BlockRemoved},
 * {@link io.hicache.core.events.AllBlocksCleared}), the publisher SPI that carries batches of them out of the process
 * ({@link io.hicache.core.events.KvEventPublisher}, found by name through
 * {@link io.hicache.core.events.KvEventPublisherProvider}), its configuration with SGLang's names
 * ({@link io.hicache.core.events.KvEventsConfig}), and {@link io.hicache.core.events.KvEventSink}, the bounded
 * queue and thread that keep a slow subscriber from ever blocking the cache. See docs/kv-events.md.
 */
package io.hicache.core.events;
