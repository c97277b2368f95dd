/**
 * Staged handoffs for device pools that no transport reaches directly (CUDA): pages pass through pinned staging
 * areas on both sides, layer by layer, so that gathering, the wire and scattering overlap.
 */
package io.hicache.transfer.staged;
