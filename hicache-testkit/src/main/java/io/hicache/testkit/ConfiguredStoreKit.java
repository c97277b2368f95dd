package io.hicache.testkit;

import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.util.Checks;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The conformance kit against a store built from configuration: what {@code ./hicache conformance --store NAME}
 * runs. {@link #run(StoreConfig, boolean)} sets the target and runs the kit. Thread-safe: concurrent calls of
 * {@code run} wait for each other, because the target is static.
 */
public class ConfiguredStoreKit extends PageStoreConformanceKit {
    private static final ReentrantLock ONE_RUN_AT_A_TIME = new ReentrantLock();
    /** The store config of the run in progress; null between runs. */
    private static volatile @Nullable StoreConfig target;

    private static volatile boolean clearAllAllowed;

    /** For the JUnit launcher; use {@link #run(StoreConfig, boolean)}. */
    public ConfiguredStoreKit() {}

    /**
     * Runs the kit against the store that {@code config} opens.
     *
     * @param allowClearAll whether the case that wipes the whole store may run; leave it off for a store
     *                      that holds data someone needs
     */
    public static ConformanceReport run(StoreConfig config, boolean allowClearAll) {
        return run(config, allowClearAll, c -> {});
    }

    /** As {@link #run(StoreConfig, boolean)}, telling {@code progress} of each case as it ends. */
    public static ConformanceReport run(
            StoreConfig config, boolean allowClearAll, Consumer<ConformanceReport.Case> progress) {
        Checks.checkNotNull(config, "config");
        ONE_RUN_AT_A_TIME.lock();
        try {
            target = config;
            clearAllAllowed = allowClearAll;
            String where;
            try (PageStore probe = PageStores.open(config)) {
                where = "page store '" + probe.name() + "' at " + probe.location();
            }
            return ConformanceRunner.run(ConfiguredStoreKit.class, where, progress);
        } finally {
            target = null;
            ONE_RUN_AT_A_TIME.unlock();
        }
    }

    @Override
    protected PageStore openStore() {
        StoreConfig config = target;
        Checks.requireState(config != null, "ConfiguredStoreKit runs only through ConfiguredStoreKit.run");
        return PageStores.open(config);
    }

    @Override
    protected boolean clearAllAllowed() {
        return clearAllAllowed;
    }
}
