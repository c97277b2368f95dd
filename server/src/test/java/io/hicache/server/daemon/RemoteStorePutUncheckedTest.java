package io.hicache.server.daemon;

import static io.hicache.server.daemon.Pages.get;
import static io.hicache.server.daemon.Pages.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.PagePattern;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code remote.put-unchecked}: the Java store's PUTs carry the flag {@code UNCHECKED} (docs/protocol.md §3 PUT), so
 * the daemon stores them with the store's checksums without summing their bytes; pages read back are the pages put,
 * checked by the store as every page it gets. Without the setting the daemon checks them.
 */
class RemoteStorePutUncheckedTest {
    private static final int PAGE_BYTES = 64 << 10;

    @Test
    void theStoresPutsAreStoredUncheckedOnlyWithTheSettingAndReadBackRight() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                Pages pages = new Pages();
                RemotePageStore checked = RemotePageStore.open(RemoteStoreConfig.local(d.port(), ""));
                RemotePageStore unchecked = RemotePageStore.open(
                        RemoteStoreConfig.local(d.port(), "").withPutUnchecked(true))) {
            Namespace ns = Pages.namespace("put-unchecked");
            List<StoreKey> keys = pages.keys(ns, 6);
            long before = d.server.cache.counters.uncheckedPages.sum();
            assertEquals(
                    3,
                    put(checked, pages.filled(keys.subList(0, 3), PAGE_BYTES)).count(PageStatus.OK));
            assertEquals(before, d.server.cache.counters.uncheckedPages.sum(), "checked without the setting");
            assertEquals(
                    3,
                    put(unchecked, pages.filled(keys.subList(3, 6), PAGE_BYTES)).count(PageStatus.OK));
            assertEquals(before + 3, d.server.cache.counters.uncheckedPages.sum(), "stored unchecked with it");
            for (RemotePageStore reader : List.of(checked, unchecked)) {
                PageBatch targets = pages.empty(keys, PAGE_BYTES);
                assertEquals(6, get(reader, targets).count(PageStatus.OK));
                for (int i = 0; i < keys.size(); i++) {
                    assertTrue(PagePattern.matches(targets.page(i), keys.get(i)), "page " + i);
                }
            }
        }
    }
}
