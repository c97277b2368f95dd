/**
 * Prefill/decode disaggregation on the transfer engine, after SGLang's protocol: a bootstrap server per prefill
 * instance, {@link io.hicache.transfer.pd.PrefillRank} and {@link io.hicache.transfer.pd.DecodeRank} exchanging
 * destinations and statuses as typed engine messages ({@code PdMessage}), each room's pages moved by the delivery path
 * the decode chose for it ({@code DeliveryPath}: direct writes, staged through pinned staging areas, or device to
 * device), aux data last, poll states, heartbeats, timeouts and a two-phase abort. See docs/transfer.md.
 */
package io.hicache.transfer.pd;
