package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The builder refuses a part set twice, names what is missing, opens once, and never leaks the store it was given. */
class HiCacheBuilderTest {
    private static final Namespace NS = Namespace.of("builder-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    @Test
    void aPartSetTwiceIsRefused() {
        HiCacheBuilder b = HiCache.builder().namespace(NS).devicePages(8);
        IllegalStateException twice = assertThrows(IllegalStateException.class, () -> b.namespace(NS));
        assertTrue(twice.getMessage().contains("namespace was already set"), twice.getMessage());
        assertThrows(IllegalStateException.class, () -> b.devicePages(16));
        assertThrows(IllegalArgumentException.class, () -> HiCache.builder().devicePages(0));
    }

    @Test
    void aMissingPartIsNamedAndTheGivenStoreIsClosed() {
        InMemoryPageStore store = new InMemoryPageStore(1 << 20);
        HiCacheBuilder b = HiCache.builder()
                .config(HiCacheConfig.from(Settings.empty()))
                .namespace(NS)
                .devicePages(8)
                .store(store);
        IllegalStateException missing = assertThrows(IllegalStateException.class, b::open);
        assertTrue(missing.getMessage().contains("geometry is not set"), missing.getMessage());
        HiCacheException closed = assertThrows(
                HiCacheException.class, () -> store.leadingHits(List.of(), Deadline.after(Duration.ofSeconds(1))));
        assertEquals(ErrorCode.STORE_CLOSED, closed.code());
    }

    @Test
    void aBuilderOpensOnce() {
        HiCacheBuilder b = HiCache.builder();
        assertThrows(IllegalStateException.class, b::open);
        IllegalStateException again = assertThrows(IllegalStateException.class, b::open);
        assertTrue(again.getMessage().contains("opened its cache already"), again.getMessage());
    }
}
