package io.hicache.testkit;

import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.store.memory.BitRot;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.util.Optional;

/** The reference store passes the kit, corruption case included. */
class InMemoryPageStoreConformanceTest extends PageStoreConformanceKit {
    @Override
    protected PageStore openStore() {
        return PageStores.open(StoreConfig.of("memory"));
    }

    @Override
    protected Optional<PageCorrupter> corrupter() {
        return Optional.of((store, key) -> BitRot.flipMiddleByte((InMemoryPageStore) store, key));
    }
}
