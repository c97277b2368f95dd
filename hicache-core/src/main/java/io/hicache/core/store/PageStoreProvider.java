package io.hicache.core.store;

import io.hicache.core.config.Setting;
import java.util.List;

/**
 * Opens page stores of one kind. Providers are found with {@link java.util.ServiceLoader} by their
 * {@link #name()} (see {@link PageStores}); a store module registers its provider in
 * {@code META-INF/services/io.hicache.core.store.PageStoreProvider}. The core never names a backend.
 *
 * <p>Implementations are stateless and thread-safe, with a public no-argument constructor.
 */
public interface PageStoreProvider {
    /** The store's name in configuration ({@code hicache-storage-backend}): lowercase, unique. */
    String name();

    /** One line saying what the store is, for help output. */
    String description();

    /** Every setting the store reads, for help output and for rejecting misspelt keys. */
    List<Setting<?>> settings();

    /**
     * Opens a store: reads and validates its settings once, and checks that the location is usable, so a
     * missing bucket or an unwritable folder fails here rather than at the first page.
     *
     * @throws io.hicache.core.HiCacheException {@link io.hicache.core.ErrorCode#CONFIG_INVALID} for bad
     *     settings, {@link io.hicache.core.ErrorCode#STORE_UNAVAILABLE} when the location cannot be used
     */
    PageStore open(StoreConfig config);
}
