/**
 * The {@code server} suite: the daemon against Redis 7, each in its own process on loopback, under one load
 * generator that speaks either protocol ({@link io.hicache.bench.server.LoadProtocol}).
 */
package io.hicache.bench.server;
