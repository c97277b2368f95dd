package io.hicache.storage.crypt;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStoreProvider;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Opens {@link EncryptedPageStore}s under the name {@code encrypted}: reads {@code encrypted.*}, opens the store that
 * {@code encrypted.inner} names through {@link PageStores} with the same settings (so {@code file.root} and the
 * others configure it as they would on their own), and wraps it. Stateless.
 */
public final class EncryptedPageStoreProvider implements PageStoreProvider {
    /** The provider's name. */
    public static final String NAME = "encrypted";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String description() {
        return "encrypts every page (AES-256-GCM) into another store, encrypted.inner, with keys from "
                + "encrypted.key-file or encrypted.key-env";
    }

    /**
     * Its own settings, then every other store's, since any of them may configure the inner store: a command line or
     * a daemon that checks settings against this list must accept {@code --file.root} beside
     * {@code --encrypted.inner file}.
     */
    @Override
    public List<Setting<?>> settings() {
        List<Setting<?>> all = new ArrayList<>(CryptConfig.SETTINGS);
        Set<String> keys = new LinkedHashSet<>();
        all.forEach(s -> keys.add(s.key()));
        for (PageStoreProvider p : PageStores.providers()) {
            if (p.name().equals(NAME)) {
                continue;
            }
            for (Setting<?> s : p.settings()) {
                if (keys.add(s.key())) {
                    all.add(s);
                }
            }
        }
        return List.copyOf(all);
    }

    @Override
    public PageStore open(StoreConfig config) {
        CryptConfig crypt = CryptConfig.from(config.settings());
        PageStore inner = PageStores.open(new StoreConfig(crypt.innerStore(), config.settings()));
        try {
            return EncryptedPageStore.wrap(inner, crypt);
        } catch (IllegalArgumentException e) {
            inner.close();
            throw new HiCacheException(ErrorCode.CONFIG_INVALID, "encrypted store: " + e.getMessage(), e);
        } catch (RuntimeException | Error e) {
            inner.close();
            throw e;
        }
    }
}
