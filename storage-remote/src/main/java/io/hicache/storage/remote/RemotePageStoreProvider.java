package io.hicache.storage.remote;

import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import java.util.List;

/** Opens {@link RemotePageStore}s under the name {@code remote}. Stateless. */
public final class RemotePageStoreProvider implements PageStoreProvider {
    @Override
    public String name() {
        return "remote";
    }

    @Override
    public String description() {
        return "a HiCache daemon (hicache serve) over its binary protocol, pipelined over pooled connections";
    }

    @Override
    public List<Setting<?>> settings() {
        return RemoteStoreConfig.SETTINGS;
    }

    @Override
    public PageStore open(StoreConfig config) {
        return RemotePageStore.open(RemoteStoreConfig.from(config.settings()));
    }
}
