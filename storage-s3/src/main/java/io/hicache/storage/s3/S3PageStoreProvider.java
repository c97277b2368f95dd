package io.hicache.storage.s3;

import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import io.hicache.storage.s3.client.S3Config;
import java.util.List;

/** Opens {@link S3PageStore}s under the name {@code s3}. Stateless. */
public final class S3PageStoreProvider implements PageStoreProvider {
    @Override
    public String name() {
        return "s3";
    }

    @Override
    public String description() {
        return "one object per page in a bucket of any S3-compatible service (AWS, MinIO, Ceph), shared by every store "
                + "on the same bucket and prefix";
    }

    @Override
    public List<Setting<?>> settings() {
        return S3Config.SETTINGS;
    }

    @Override
    public PageStore open(StoreConfig config) {
        return S3PageStore.open(S3Config.from(config.settings()));
    }
}
