package io.hicache.storage.nixl;

import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.StoreConfig;
import io.hicache.storage.s3.client.S3Config;
import java.util.ArrayList;
import java.util.List;

/**
 * Opens {@link NixlPageStore}s under the name {@code nixl}: its own {@code nixl.*} settings, and the {@code s3.*}
 * settings for the OBJ plugin. Stateless.
 */
public final class NixlPageStoreProvider implements PageStoreProvider {
    private static final List<Setting<?>> SETTINGS;

    static {
        List<Setting<?>> all = new ArrayList<>(NixlStoreConfig.SETTINGS);
        all.addAll(S3Config.SETTINGS);
        SETTINGS = List.copyOf(all);
    }

    @Override
    public String name() {
        return "nixl";
    }

    @Override
    public String description() {
        return "SGLang's HiCacheNixl on a Java NIXL agent: pages as files (POSIX plugin, spread over several folders) or"
                + " as S3 objects (OBJ plugin), one transfer of page and checksum trailer per page";
    }

    @Override
    public List<Setting<?>> settings() {
        return SETTINGS;
    }

    @Override
    public PageStore open(StoreConfig config) {
        return NixlPageStore.open(NixlStoreConfig.from(config.settings()));
    }
}
