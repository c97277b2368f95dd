package io.hicache.cluster;

import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.util.ArrayList;
import java.util.List;

/** Opens {@link ClusterPageStore}s under the name {@code cluster}. Stateless. */
public final class ClusterPageStoreProvider implements PageStoreProvider {
    @Override
    public String name() {
        return "cluster";
    }

    @Override
    public String description() {
        return "the daemons of a cluster on etcd (cluster.etcd, cluster.name), each page at its slot's owner";
    }

    @Override
    public List<Setting<?>> settings() {
        List<Setting<?>> all = new ArrayList<>(ClusterConfig.SETTINGS);
        all.addAll(List.of(
                RemoteStoreConfig.AUTH_TOKEN,
                RemoteStoreConfig.CONNECTIONS,
                RemoteStoreConfig.CONNECT_TIMEOUT,
                RemoteStoreConfig.TRANSPORT));
        return all;
    }

    @Override
    public PageStore open(StoreConfig config) {
        return ClusterPageStore.open(ClusterConfig.from(config.settings()), RemoteStoreConfig.from(config.settings()));
    }
}
