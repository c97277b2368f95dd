/**
 * The transfer engine (API): registered memory regions published as a segment, batched READ and WRITE requests to
 * peers' segments with per-request states and deadlines, and small messages between engines. Transports plug in
 * behind {@link io.hicache.transfer.spi} (TCP on Netty and shared memory on one host ship in this module); peers reach
 * each other through the engine's control connection ({@code io.hicache.transfer.control}, internal). Prefill/decode
 * disaggregation on top of it is in {@link io.hicache.transfer.pd}. See docs/transfer.md.
 */
package io.hicache.transfer;
