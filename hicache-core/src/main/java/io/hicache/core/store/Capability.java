package io.hicache.core.store;

/**
 * An optional property a page store may declare. The conformance kit runs the cases for a capability only
 * against stores that declare it, and skips them (never passes them) for the others.
 */
public enum Capability {
    /** Pages survive closing the store and opening it again with the same configuration. */
    PERSISTENT,
    /** Several store instances on the same location (in one process or many) see each other's pages. */
    SHARED,
    /** The store has a capacity and evicts pages on its own to stay under it. */
    EVICTING
}
