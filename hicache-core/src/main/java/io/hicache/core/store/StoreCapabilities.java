package io.hicache.core.store;

import io.hicache.core.util.Checks;
import java.util.EnumSet;
import java.util.Set;

/**
 * What a page store declares about itself. Immutable.
 *
 * @param features           optional properties it has
 * @param maxPageBytes       largest page it accepts; larger pages are rejected before any I/O
 * @param preferredBatchKeys how many keys per call it handles best (callers may send more or fewer)
 */
public record StoreCapabilities(Set<Capability> features, long maxPageBytes, int preferredBatchKeys) {
    public StoreCapabilities {
        features = features.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(features));
        Checks.checkPositive(maxPageBytes, "maxPageBytes");
        Checks.checkPositive(preferredBatchKeys, "preferredBatchKeys");
    }

    /** True if the store declares {@code capability}. */
    public boolean has(Capability capability) {
        return features.contains(capability);
    }
}
