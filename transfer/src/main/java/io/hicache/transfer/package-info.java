/**
 * The transfer engine: registered memory regions published as a segment, batched READ and WRITE requests to
 * peers' segments with per-request states and deadlines, over transports behind {@link io.hicache.transfer.spi}
 * (TCP on Netty, shared memory on one host). Prefill/decode disaggregation on top of it is in
 * {@link io.hicache.transfer.pd}. See docs/transfer.md.
 */
package io.hicache.transfer;
