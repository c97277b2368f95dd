/**
 * The NIXL plugin SPI, as NIXL names its parts: {@link io.hicache.storage.nixl.spi.NixlPlugin} (found with
 * {@link java.util.ServiceLoader} from {@code META-INF/services/io.hicache.storage.nixl.spi.NixlPlugin}) makes
 * {@link io.hicache.storage.nixl.spi.NixlBackend}s, which register {@link io.hicache.storage.nixl.spi.MemoryRegion}s
 * and move {@link io.hicache.storage.nixl.spi.Piece}s of them; memory types, file modes, status codes and
 * {@link io.hicache.storage.nixl.spi.FanInCompletion}, the completion of a post run as parallel parts. SPI, for
 * plugins in this module and outside it; the agent that drives the backends is the store's internal.
 */
package io.hicache.storage.nixl.spi;
