package io.hicache.core.store;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * Finds page store providers on the class path, by name. Thread-safe; the providers are loaded once.
 */
public final class PageStores {
    private PageStores() {}

    private static final class Loaded {
        static final Map<String, PageStoreProvider> BY_NAME = load();

        private static Map<String, PageStoreProvider> load() {
            Map<String, PageStoreProvider> byName = new TreeMap<>();
            for (PageStoreProvider provider :
                    ServiceLoader.load(PageStoreProvider.class, PageStores.class.getClassLoader())) {
                PageStoreProvider other = byName.putIfAbsent(provider.name(), provider);
                if (other != null) {
                    throw new HiCacheException(
                            ErrorCode.CONFIG_INVALID,
                            "two page stores are named '" + provider.name() + "': "
                                    + other.getClass().getName() + " and "
                                    + provider.getClass().getName());
                }
            }
            return Map.copyOf(byName);
        }
    }

    /** Every provider on the class path, sorted by name. */
    public static List<PageStoreProvider> providers() {
        return Loaded.BY_NAME.values().stream()
                .sorted((a, b) -> a.name().compareTo(b.name()))
                .toList();
    }

    /** The provider named {@code name}, if its module is on the class path. */
    public static Optional<PageStoreProvider> find(String name) {
        return Optional.ofNullable(Loaded.BY_NAME.get(name));
    }

    /**
     * The provider named {@code name}.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNKNOWN}, listing the names that are available
     */
    public static PageStoreProvider provider(String name) {
        return find(name)
                .orElseThrow(() -> new HiCacheException(
                        ErrorCode.STORE_UNKNOWN,
                        "no page store is named '" + name + "'; available: "
                                + providers().stream()
                                        .map(PageStoreProvider::name)
                                        .collect(Collectors.joining(", "))));
    }

    /** Opens the store that {@code config} names; the caller closes it. */
    public static PageStore open(StoreConfig config) {
        return provider(config.storeName()).open(config);
    }
}
