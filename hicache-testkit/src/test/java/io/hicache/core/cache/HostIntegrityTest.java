package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.StoreKey;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.ForwardingPageStore;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.core.tree.MatchResult;
import io.hicache.core.tree.TreeNode;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * Read-side integrity of the host tier (issue 40, part 2): a host page whose bytes were damaged after its backup, or
 * whose slot no longer names it, is never loaded back as KV; it is counted and leaves the tree with what hangs below
 * it, and the request computes those tokens. Without the checksum check the same damage reaches the device, which
 * the engine's own byte check here catches: the check is what stops it.
 */
class HostIntegrityTest {
    private static final List<int[]> PROMPTS =
            List.of(prompt(0, 64), prompt(10_000, 64), prompt(20_000, 64), prompt(30_000, 64));

    /** Serves the four prompts through a 24-page device: the first one is host-only afterwards. */
    private static List<TreeNode> evictFirstPrompt(TestEngine e) throws InterruptedException {
        for (int i = 0; i < PROMPTS.size(); i++) {
            e.serve("fill-" + i, PROMPTS.get(i));
            e.quiesce();
        }
        CacheCore core = e.cache.core();
        core.lock.lock();
        try {
            MatchResult m = core.tree.match(PROMPTS.getFirst());
            List<TreeNode> path = core.tree.evictedPath(m.lastDeviceNode(), m.lastNode());
            assertTrue(!path.isEmpty() && m.hostPages() > 0, "the first prompt went to the host");
            return path;
        } finally {
            core.lock.unlock();
        }
    }

    private static void flipByte(TestEngine e, int slot) {
        HostSlab slab = e.cache.core().host().slab();
        long at = slab.chunkOffset(slot, 0, 0) + 5;
        slab.memory().set(ValueLayout.JAVA_BYTE, at, (byte) ~slab.memory().get(ValueLayout.JAVA_BYTE, at));
    }

    @Test
    void aHostPageDamagedSinceItsBackupIsNeverLoadedBack() throws Exception {
        try (TestEngine e = new TestEngine(settings("hicache-verify-host-checksums", "true"), 24, null)) {
            List<TreeNode> path = evictFirstPrompt(e);
            TreeNode first = path.getFirst();
            flipByte(e, first.hostSlots()[0]);
            TestEngine.Served back = e.serve("back", PROMPTS.getFirst()); // checks the prefix's bytes
            assertEquals(0, back.loadedTokens(), "the damaged page begins the host part: nothing is loaded back");
            assertEquals(1, e.cache.stats().corruptHostPages());
            assertTrue(back.computedPages() > 0);
            e.quiesce();
            e.cache.core().checkConsistency();
            // and it is gone: the next request finds the recomputed pages, not the damaged ones
            TestEngine.Served again = e.serve("again", PROMPTS.getFirst());
            assertEquals(64, again.deviceTokens() + again.hostTokens());
            assertEquals(1, e.cache.stats().corruptHostPages(), "found once");
        }
    }

    @Test
    void withoutTheChecksumCheckTheSameDamageWouldReachTheDevice() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 24, null)) {
            List<TreeNode> path = evictFirstPrompt(e);
            flipByte(e, path.getFirst().hostSlots()[0]);
            AssertionError wrong = assertThrows(AssertionError.class, () -> e.serve("back", PROMPTS.getFirst()));
            assertTrue(String.valueOf(wrong.getMessage()).contains("page"), String.valueOf(wrong.getMessage()));
        }
    }

    /** Puts wait until {@link #open} completes: the uploader stops in a put meanwhile. */
    private static final class GatedPuts extends ForwardingPageStore {
        final CompletableFuture<Void> open = new CompletableFuture<>();
        final CompletableFuture<Void> entered = new CompletableFuture<>();

        GatedPuts() {
            super(new InMemoryPageStore(1L << 30));
        }

        @Override
        public CompletableFuture<BatchResult> put(PageBatch sources, Deadline deadline) {
            entered.complete(null);
            return open.thenCompose(v -> super.put(sources, deadline));
        }
    }

    @Test
    void aHostPageDamagedBeforeItsUploadNeverReachesTheStore() throws Exception {
        GatedPuts store = new GatedPuts();
        // one upload thread: b waits behind a's put, so its bytes are read (and checked) after the damage
        try (TestEngine e = new TestEngine(settings("hicache-upload-threads", "1"), 64, store)) {
            e.serve("a", PROMPTS.get(0));
            store.entered.get(10, java.util.concurrent.TimeUnit.SECONDS); // a's upload waits in the gated put
            e.serve("b", PROMPTS.get(1));
            long until = System.nanoTime() + 10_000_000_000L;
            CacheCore core = e.cache.core();
            int slot = -1;
            while (slot < 0 && System.nanoTime() < until) { // b's backup to the host done
                slot = core.host().find(e.keys(PROMPTS.get(1)).getFirst());
                Thread.sleep(5);
            }
            assertTrue(slot >= 0, "b was backed up");
            flipByte(e, slot);
            store.open.complete(null);
            e.quiesce();
            List<StoreKey> a = e.keys(PROMPTS.get(0));
            List<StoreKey> b = e.keys(PROMPTS.get(1));
            assertEquals(a.size(), (int)
                    store.leadingHits(a, Deadline.after(Duration.ofSeconds(5))).get());
            assertEquals(
                    0,
                    (int) store.leadingHits(b, Deadline.after(Duration.ofSeconds(5)))
                            .get(),
                    "not uploaded");
            assertEquals(1, e.cache.stats().corruptHostPages());
            // and the host copy was condemned: b is computed again rather than loaded with the damage
            assertTrue(core.host().find(b.getFirst()) < 0);
        }
    }

    @Test
    void aSlotThatNoLongerNamesItsPageIsDroppedEvenWithoutTheChecksumCheck() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 24, null)) {
            List<TreeNode> path = evictFirstPrompt(e);
            TreeNode last = path.getLast();
            int pagesBefore = 0;
            for (TreeNode n : path.subList(0, path.size() - 1)) {
                pagesBefore += n.pages();
            }
            e.cache.core().host().condemn(last.hostSlots()[0]); // its record no longer names the page
            TestEngine.Served back = e.serve("back", PROMPTS.getFirst());
            assertEquals(pagesBefore * 4, back.loadedTokens(), "loaded up to the misnamed node, not past it");
            assertEquals(1, e.cache.stats().corruptHostPages());
            e.quiesce();
            e.cache.core().checkConsistency();
        }
    }
}
