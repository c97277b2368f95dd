/**
 * The shared-memory transport for peers on one host. A plug-in behind {@link io.hicache.transfer.spi}; only
 * {@link io.hicache.transfer.shm.ShmTransportProvider} is public, for the service loader. Not API.
 */
package io.hicache.transfer.shm;
