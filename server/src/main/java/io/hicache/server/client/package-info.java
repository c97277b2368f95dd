/**
 * The Java client of the HiCache daemon: the {@code remote} page store ({@link io.hicache.server.client.RemotePageStore}),
 * and same-host leases on the daemon's memory ({@link io.hicache.server.client.PageLease}).
 */
package io.hicache.server.client;
