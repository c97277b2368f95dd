/**
 * The TCP transport, on Netty: its own listener and data connections to peers' listeners. A plug-in behind
 * {@link io.hicache.transfer.spi} like {@code shm}; only {@link io.hicache.transfer.tcp.TcpTransportProvider} is
 * public, for the service loader. Not API.
 */
package io.hicache.transfer.tcp;
