/**
 * Prefill/decode disaggregation on the transfer engine, after SGLang's protocol: a bootstrap server per prefill
 * instance, {@link io.hicache.transfer.pd.PrefillRank} and {@link io.hicache.transfer.pd.DecodeRank} exchanging
 * destinations and statuses as engine messages, chunked one-sided writes of pages and aux data, poll states,
 * heartbeats, timeouts and a two-phase abort. See docs/transfer.md.
 */
package io.hicache.transfer.pd;
