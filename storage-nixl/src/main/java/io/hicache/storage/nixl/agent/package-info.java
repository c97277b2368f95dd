/**
 * NIXL's transfer model in Java: {@link io.hicache.storage.nixl.agent.NixlAgent} (registrations, descriptor lists,
 * prepared transfers posted and polled, notifications), memory types and status codes as NIXL names them, and the
 * plugin SPI ({@link io.hicache.storage.nixl.agent.NixlPlugin}, {@link io.hicache.storage.nixl.agent.NixlBackend})
 * found with {@link java.util.ServiceLoader}.
 */
package io.hicache.storage.nixl.agent;
