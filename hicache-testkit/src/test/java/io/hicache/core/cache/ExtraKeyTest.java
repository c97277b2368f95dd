package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.HiCacheTest.unclosable;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import io.hicache.core.Deadline;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Issue 19, part 6: the extra key (a LoRA adapter, a cache salt) is per request, as SGLang keys its tree by it: the
 * same tokens under two adapters never share a page, in the tree or in the page store; under one adapter they do.
 */
class ExtraKeyTest {
    @Test
    void requestsShareCachedPagesOnlyUnderTheSameExtraKey() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 64, null)) {
            int[] p = prompt(61_000, 32); // 8 pages
            assertEquals(8, e.serve("plain", p).computedPages());
            assertEquals(8, e.serve("lora-a", "adapter-a", p).computedPages(), "no pages of the plain request");
            assertEquals(8, e.serve("lora-b", "adapter-b", p).computedPages(), "none of adapter a's either");
            TestEngine.Served again = e.serve("lora-a-again", "adapter-a", p); // serve checks adapter a's bytes
            assertEquals(32, again.deviceTokens(), "adapter a's pages, for adapter a");
            assertEquals(0, again.computedPages());
            assertEquals(32, e.serve("plain-again", p).deviceTokens());
            e.quiesce();
            assertEquals(24, e.cache.stats().devicePages(), "three copies of the prompt, one per key");
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void thePageStoreKeepsAdaptersApartAndServesEachItsOwn() throws Exception {
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        int[] p = prompt(62_000, 64); // 16 pages
        try {
            try (TestEngine first = new TestEngine(settings(), 64, unclosable(store))) {
                first.serve("a", "adapter-a", p);
                first.serve("b", "adapter-b", p);
                first.quiesce();
                assertEquals(32, store.stats().storedPages(), "each adapter's pages under their own keys");
                Set<Object> keys = new HashSet<>(first.keys("adapter-a", p));
                keys.retainAll(first.keys("adapter-b", p));
                assertEquals(Set.of(), keys, "no key in common");
                assertNotEquals(first.keys("", p), first.keys("adapter-a", p));
                assertEquals(
                        16,
                        store.leadingHits(first.keys("adapter-a", p), Deadline.after(Duration.ofSeconds(5)))
                                .get());
            }
            try (TestEngine second = new TestEngine(
                    settings("hicache-storage-prefetch-policy", "wait_complete"), 64, unclosable(store))) {
                TestEngine.Served a = second.serve("a", "adapter-a", p); // checks adapter a's bytes
                assertEquals(64, a.outcome().storeTokens(), "adapter a's pages from the store: " + a);
                assertEquals(16, second.serve("c", "adapter-c", p).computedPages(), "an adapter never seen: nothing");
                second.quiesce();
                second.cache.core().checkConsistency();
            }
        } finally {
            store.close();
        }
    }
}
