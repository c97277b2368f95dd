/**
 * The Java client of the HiCache daemon: the {@code remote} page store ({@link io.hicache.storage.remote.RemotePageStore}),
 * and same-host leases on the daemon's memory ({@link io.hicache.storage.remote.PageLease}).
 */
package io.hicache.storage.remote;
