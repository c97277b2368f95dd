package io.hicache.core.store.memory;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import java.util.List;

/** Opens {@link InMemoryPageStore}s under the name {@code memory}. Stateless. */
public final class InMemoryPageStoreProvider implements PageStoreProvider {
    /** How many page bytes the store holds before it rejects puts. */
    public static final Setting<Long> CAPACITY =
            Setting.bytes("memory.capacity", "1GiB", "page bytes the in-memory store holds before it rejects puts");

    @Override
    public String name() {
        return "memory";
    }

    @Override
    public String description() {
        return "pages in this process's memory: the reference store, for tests and demos (not persistent)";
    }

    @Override
    public List<Setting<?>> settings() {
        return List.of(CAPACITY);
    }

    @Override
    public PageStore open(StoreConfig config) {
        long capacity = config.settings().get(CAPACITY);
        if (capacity < 1) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "setting '" + CAPACITY.key() + "' must be at least 1 byte, was " + capacity);
        }
        return new InMemoryPageStore(capacity);
    }
}
