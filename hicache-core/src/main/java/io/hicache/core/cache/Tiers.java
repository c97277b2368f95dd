package io.hicache.core.cache;

/** Which tiers the cache runs ({@code hicache-tiers}). */
public enum Tiers {
    /** Device, host and, when a page store is configured, the page store: HiCache. */
    ALL("all"),
    /**
     * The device pool alone, under the radix tree: what is evicted is gone. No host pool is opened (no slab in
     * {@code host.dir}) and no page store is allowed; for engines that want prefix caching only, and the honest
     * baseline of the {@code replay} benchmark.
     */
    DEVICE_ONLY("device-only");

    private final String configName;

    Tiers(String configName) {
        this.configName = configName;
    }

    public String configName() {
        return configName;
    }
}
