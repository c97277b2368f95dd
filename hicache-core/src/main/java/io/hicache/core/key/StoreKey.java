package io.hicache.core.key;

import io.hicache.core.util.Checks;

/**
 * The name of one page in a page store: a namespace and a page hash. Immutable.
 *
 * <p>{@link #toString()} is {@code <namespace id>/<page hash hex>}, 97 characters of {@code [0-9a-f/]}: safe
 * as a relative path or object name, and the same in every process that hashes the same tokens in the same
 * namespace.
 */
public final class StoreKey {
    /** Length of {@link #toString()}. */
    public static final int NAME_LENGTH = 32 + 1 + PageHash.HEX_LENGTH;

    private final Namespace namespace;
    private final PageHash hash;

    /** The key of page {@code hash} in {@code namespace}. */
    public StoreKey(Namespace namespace, PageHash hash) {
        this.namespace = Checks.checkNotNull(namespace, "namespace");
        this.hash = Checks.checkNotNull(hash, "hash");
    }

    public Namespace namespace() {
        return namespace;
    }

    public PageHash hash() {
        return hash;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof StoreKey k && k.hash.equals(hash) && k.namespace.equals(namespace);
    }

    @Override
    public int hashCode() {
        return hash.hashCode() * 31 + namespace.hashCode();
    }

    /** {@code <namespace id>/<page hash hex>}. */
    @Override
    public String toString() {
        return namespace.id() + "/" + hash.toHex();
    }
}
