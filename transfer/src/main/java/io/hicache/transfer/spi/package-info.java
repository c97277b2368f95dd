/**
 * The transport SPI: a {@link io.hicache.transfer.spi.Transport} moves {@link io.hicache.transfer.spi.Slice slices}
 * (one-sided reads and writes of registered memory) over a {@link io.hicache.transfer.spi.TransportLink} to one
 * peer, and serves peers' requests into the engine's {@link io.hicache.transfer.spi.LocalSegment}. Implementations are
 * found with {@link java.util.ServiceLoader} through {@link io.hicache.transfer.spi.TransportProvider}.
 *
 * <p>The package also holds what the engine and its transports both speak: the published
 * {@link io.hicache.transfer.spi.SegmentDescriptor} and {@link io.hicache.transfer.spi.RegionDescriptor}, and the
 * {@link io.hicache.transfer.spi.TransferOp direction} of a transfer. It depends on the JDK and
 * {@code io.hicache.core} only, never on the engine, so a transport in another module needs nothing else of
 * {@code transfer}.
 */
package io.hicache.transfer.spi;
