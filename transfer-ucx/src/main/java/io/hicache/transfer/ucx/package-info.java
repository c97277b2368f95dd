/**
 * The {@code ucx} transport: one-sided reads and writes of registered memory through UCX (OpenUCX's UCP API, bound by
 * JUCX), which moves them over RDMA where a NIC exists, over shared memory on one host and over TCP otherwise. Found by
 * {@link java.util.ServiceLoader} through {@link io.hicache.transfer.ucx.UcxTransportProvider}; nothing else uses this
 * package. Needs UCX's library ({@code libucp.so.0}, Debian's {@code libucx0}) at run time; without it the provider
 * refuses with the reason. Settings are the engine's transport options {@code ucx.*} ({@code UcxSettings}).
 */
package io.hicache.transfer.ucx;
