/**
 * The transport SPI: a {@link io.hicache.transfer.spi.Transport} moves {@link io.hicache.transfer.spi.Slice slices}
 * (one-sided reads and writes of registered memory) over a {@link io.hicache.transfer.spi.TransportLink} to one
 * peer. Implementations are found with {@link java.util.ServiceLoader} through
 * {@link io.hicache.transfer.spi.TransportProvider}.
 */
package io.hicache.transfer.spi;
