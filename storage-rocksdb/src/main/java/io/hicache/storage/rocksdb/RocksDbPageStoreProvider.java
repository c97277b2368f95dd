package io.hicache.storage.rocksdb;

import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import java.util.List;

/** Opens {@link RocksDbPageStore}s under the name {@code rocksdb}. Stateless. */
public final class RocksDbPageStoreProvider implements PageStoreProvider {
    @Override
    public String name() {
        return "rocksdb";
    }

    @Override
    public String description() {
        return "pages in a local RocksDB database (blob files, no compression), bounded by rocksdb.capacity "
                + "(oldest pages are deleted first)";
    }

    @Override
    public List<Setting<?>> settings() {
        return RocksDbStoreConfig.SETTINGS;
    }

    @Override
    public PageStore open(StoreConfig config) {
        return RocksDbPageStore.open(RocksDbStoreConfig.from(config.settings()));
    }
}
