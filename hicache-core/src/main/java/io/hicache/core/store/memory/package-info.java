/**
 * The reference page store, {@code memory}: pages in off-heap memory of the process, gone when it closes. Embedders
 * use it where no L3 is wanted and tests use it as the store every other store is compared with; it passes the
 * conformance kit.
 */
package io.hicache.core.store.memory;
