package io.hicache.storage.file;

import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import java.util.List;

/** Opens {@link FilePageStore}s under the name {@code file}. Stateless. */
public final class FilePageStoreProvider implements PageStoreProvider {
    @Override
    public String name() {
        return "file";
    }

    @Override
    public String description() {
        return "one file per page in a local folder, bounded by file.capacity (least recently used pages are evicted)";
    }

    @Override
    public List<Setting<?>> settings() {
        return FileStoreConfig.SETTINGS;
    }

    @Override
    public PageStore open(StoreConfig config) {
        return FilePageStore.open(FileStoreConfig.from(config.settings()));
    }
}
