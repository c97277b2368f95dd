/**
 * The {@code server} suite: the daemon against Redis 7 and memcached, each in its own process on loopback, under one
 * load generator that speaks each protocol ({@link io.hicache.bench.server.LoadProtocol}); and the daemon's same-host
 * path (leases, reservations) measured by a minimal same-host client.
 */
package io.hicache.bench.server;
