package io.hicache.core.store;

import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;

/**
 * What it takes to open a page store: the provider's name and the settings it reads (its own keys start with
 * its name, {@code file.root}). Immutable.
 *
 * @param storeName the provider's name
 * @param settings  the configuration values
 */
public record StoreConfig(String storeName, Settings settings) {
    public StoreConfig {
        Checks.checkNotNull(storeName, "storeName");
        Checks.requireArgument(!storeName.isBlank(), "storeName must not be blank");
        Checks.checkNotNull(settings, "settings");
    }

    /** A store with every setting at its default. */
    public static StoreConfig of(String storeName) {
        return new StoreConfig(storeName, Settings.empty());
    }
}
