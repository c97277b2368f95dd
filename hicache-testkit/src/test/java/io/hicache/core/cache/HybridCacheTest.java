package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.HiCacheTest.unclosable;
import static io.hicache.core.cache.TestEngine.concat;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.PagePart;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.HybridGeometry;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 38, part 2: a hybrid model (full attention, a sliding window of 2 pages, a recurrent state) through every
 * tier. The engine "computes" each part as a pattern of its key, so a part restored for the wrong prefix, or a hit
 * whose parts are not all there, fails a byte check or a count.
 */
class HybridCacheTest {
    private static final KvGeometry WINDOW_LAYERS = KvGeometry.mha(1, 1, 8, KvDtype.BFLOAT16);
    /** Pages of 4 tokens: the window of 8 tokens is 2 pages. */
    private static final HybridGeometry MODEL = HybridGeometry.fullAttention(TestEngine.GEOMETRY)
            .withWindow(WINDOW_LAYERS, 8)
            .withState(256);

    /** A prefetch the request waits for. */
    private static final Map<String, String> WAIT = settings("hicache-storage-prefetch-policy", "wait_complete");

    private final Arena arena = Arena.ofShared();
    /** The model the helpers make parts for. */
    private HybridGeometry model = MODEL;

    @AfterEach
    void free() {
        arena.close();
    }

    /** What serving a prompt found, and how far its restored parts reached. */
    private record Served(int deviceTokens, int hostTokens, int prefixPages, int restoredPages) {}

    /**
     * Serves {@code prompt}: request, prefetch, load-back, the prefix's KV and its end's parts checked byte for byte;
     * then computes the rest and commits, with parts at each of {@code chunkEnds} (pages) and at the end.
     */
    private Served serve(TestEngine e, String id, int[] prompt, int... chunkEnds) throws InterruptedException {
        try (CacheRequest r = e.cache.request(id, prompt)) {
            int device = r.deviceTokens();
            int host = r.hostTokens();
            long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (!r.tryEndPrefetch()) {
                assertTrue(System.nanoTime() < until, "the prefetch never ended");
                Thread.sleep(1);
            }
            assertTrue(r.loadBack(Integer.MAX_VALUE).await(Duration.ofSeconds(10)));
            int[] prefix = r.prefixPages();
            e.verify(prompt, prefix);
            PageHashes hashes = e.hashes("", prompt);
            PrefixParts targets = blank(prefix.length);
            int restored = r.restoreParts(targets);
            assertEquals(prefix.length, restored, "the parts restored end where the prefix does");
            if (restored > 0) {
                checkParts(e, hashes, restored, targets);
            }
            int whole = prompt.length / e.page;
            int[] fresh = r.allocate(whole - prefix.length);
            MemorySegment flat = arena.allocate(e.cache.format().pageBytes(), 64);
            for (int i = 0; i < fresh.length; i++) {
                PagePattern.fill(flat, e.ns.key(hashes.get(prefix.length + i)));
                e.cache.device().writePage(fresh[i], flat);
            }
            int[] all = Arrays.copyOf(prefix, whole);
            System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
            for (int end : chunkEnds) {
                if (end > prefix.length) {
                    r.commit(
                            Arrays.copyOf(prompt, end * e.page), Arrays.copyOf(all, end), false, parts(e, hashes, end));
                }
            }
            r.commit(Arrays.copyOf(prompt, whole * e.page), all, true, parts(e, hashes, whole));
            return new Served(device, host, prefix.length, restored);
        }
    }

    /** The parts an engine computed at the end of {@code end} pages: patterns of their keys. */
    private PrefixParts parts(TestEngine e, PageHashes hashes, int end) {
        PrefixParts p = blank(end);
        for (int i = 0; i < p.windowPages().size(); i++) {
            int page = end - p.windowPages().size() + i;
            PagePattern.fill(
                    p.windowPages().get(i),
                    e.ns.forPart(PagePart.SLIDING_WINDOW).key(hashes.get(page)));
        }
        p.state()
                .ifPresent(s -> PagePattern.fill(
                        s, e.ns.forPart(PagePart.RECURRENT_STATE).key(hashes.get(end - 1))));
        return p;
    }

    private void checkParts(TestEngine e, PageHashes hashes, int end, PrefixParts got) {
        for (int i = 0; i < got.windowPages().size(); i++) {
            int page = end - got.windowPages().size() + i;
            StoreKey key = e.ns.forPart(PagePart.SLIDING_WINDOW).key(hashes.get(page));
            assertTrue(PagePattern.matches(got.windowPages().get(i), key), "window page " + page + " of end " + end);
        }
        StoreKey state = e.ns.forPart(PagePart.RECURRENT_STATE).key(hashes.get(end - 1));
        got.state().ifPresent(s -> assertTrue(PagePattern.matches(s, state), "the state after page " + (end - 1)));
    }

    /** Segments of the shape of the end of {@code end} pages. */
    private PrefixParts blank(int end) {
        List<MemorySegment> window = new ArrayList<>();
        for (int i = 0; i < Math.min(model.windowPages(4), end); i++) {
            window.add(arena.allocate(model.windowPageBytes(4), 64));
        }
        return new PrefixParts(
                window, model.stateBytes().isPresent() ? Optional.of(arena.allocate(256, 64)) : Optional.empty());
    }

    @Test
    void aRepeatedPrefixIsRestoredFromTheDeviceWithItsWindowAndState() throws Exception {
        try (TestEngine e = TestEngine.hybrid(settings(), 64, null, MODEL)) {
            int[] a = prompt(1000, 40);
            assertEquals(0, serve(e, "a", a).deviceTokens());
            Served again = serve(e, "b", concat(a, prompt(5000, 8)));
            assertEquals(40, again.deviceTokens());
            assertEquals(10, again.restoredPages());
            assertEquals(10, serve(e, "c", a).restoredPages(), "the same end committed again is kept once");
            assertEquals(2, e.cache.core().parts.endpoints());
            assertTrue(
                    e.cache.stats().failures().isEmpty(),
                    () -> e.cache.stats().failures().toString());
            e.quiesce();
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void aSharedPrefixWithoutAStateAtItsEndIsNoHit() throws Exception {
        try (TestEngine e = TestEngine.hybrid(settings(), 64, null, MODEL)) {
            int[] a = prompt(1000, 40);
            serve(e, "a", a);
            // The first 6 pages of a are cached, but no state was kept after page 5: SGLang's Mamba radix cache does
            // not match into a node whose state it lacks, nor does this.
            Served b = serve(e, "b", concat(Arrays.copyOf(a, 24), prompt(7000, 16)));
            assertEquals(0, b.deviceTokens());
            assertEquals(0, b.restoredPages());
            // Chunk ends leave states: a prompt diverging after a chunk end restores to it.
            int[] c = prompt(20_000, 40);
            serve(e, "c", c, 6);
            Served d = serve(e, "d", concat(Arrays.copyOf(c, 28), prompt(9000, 12)));
            assertEquals(24, d.deviceTokens(), "the chunk end at 6 pages, not the 7 pages shared");
            assertEquals(6, d.restoredPages());
            e.quiesce();
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void aWindowOnlyModelReusesAPrefixOnlyWhereItsWindowIsWhole() throws Exception {
        model = HybridGeometry.fullAttention(TestEngine.GEOMETRY).withWindow(WINDOW_LAYERS, 8);
        try (TestEngine e = TestEngine.hybrid(settings(), 64, null, model)) {
            int[] a = prompt(1000, 40);
            serve(e, "a", a);
            // 9 of a's pages shared: the window's pages 7 and 8 are needed there, and only 8 and 9 were kept
            assertEquals(
                    0,
                    serve(e, "b", concat(Arrays.copyOf(a, 36), prompt(7000, 8))).deviceTokens());
            Served c = serve(e, "c", concat(a, prompt(8000, 8)));
            assertEquals(40, c.deviceTokens());
            assertEquals(10, c.restoredPages());
            // a ragged commit is fine without a state: the window pages of its whole pages are what they are
            int[] d = prompt(30_000, 18);
            try (CacheRequest r = e.cache.request("d", d)) {
                int[] pages = r.allocate(4);
                MemorySegment flat = arena.allocate(e.cache.format().pageBytes(), 64);
                for (int i = 0; i < 4; i++) {
                    PagePattern.fill(flat, e.ns.key(e.hashes("", d).get(i)));
                    e.cache.device().writePage(pages[i], flat);
                }
                r.commit(d, pages, true, parts(e, e.hashes("", d), 4));
            }
            assertEquals(
                    16,
                    serve(e, "d2", concat(Arrays.copyOf(d, 16), prompt(9, 8))).deviceTokens());
        }
    }

    @Test
    void aCommitWithoutPartsCachesKvThatNoRequestReusesAlone() throws Exception {
        try (TestEngine e = TestEngine.hybrid(settings(), 64, null, MODEL)) {
            int[] a = prompt(1000, 40);
            e.serve("a", a); // the plain commit: KV only
            Served b = serve(e, "b", concat(a, prompt(5000, 8)));
            assertEquals(0, b.deviceTokens());
            assertEquals(0, b.restoredPages());
        }
    }

    @Test
    void afterDeviceEvictionTheHostRestoresTheKvAndTheParts() throws Exception {
        try (TestEngine e = TestEngine.hybrid(settings(), 24, null, MODEL)) {
            int[] a = prompt(1000, 40);
            serve(e, "a", a);
            e.quiesce();
            for (int i = 0; i < 4; i++) { // 10 pages each through a pool of 24: a leaves the device
                serve(e, "x" + i, prompt(100_000 + 1000 * i, 40));
                e.quiesce();
            }
            Served again = serve(e, "b", concat(a, prompt(5000, 8)));
            assertEquals(0, again.deviceTokens());
            assertEquals(40, again.hostTokens());
            assertEquals(10, again.prefixPages(), "loaded back, with the parts of its end");
            assertEquals(10, again.restoredPages());
            e.quiesce();
            e.cache.core().checkConsistency();
        }
    }

    @Test
    void aFreshCacheRestoresKvAndPartsFromTheStore() throws Exception {
        InMemoryPageStore store = new InMemoryPageStore(1L << 30);
        int[] a = prompt(1000, 40);
        try (TestEngine first = TestEngine.hybrid(settings(), 64, unclosable(store), MODEL)) {
            serve(first, "a", a, 6);
            first.quiesce();
        }
        try (TestEngine second = TestEngine.hybrid(WAIT, 64, unclosable(store), MODEL)) {
            Served b = serve(second, "b", concat(a, prompt(5000, 8)));
            assertEquals(0, b.deviceTokens());
            assertEquals(10, b.prefixPages(), "the prefetch fetched the KV and the parts of the end at 10 pages");
            assertEquals(10, b.restoredPages());
        }
        // The state of that end lost in the store (a partial upload, an eviction): the end at 6 pages is what every
        // part restores, and only that much is fetched and reused.
        try (TestEngine first = TestEngine.hybrid(settings(), 64, unclosable(store), MODEL)) {
            PageHashes hashes = first.hashes("", a);
            StoreKey state = first.ns.forPart(PagePart.RECURRENT_STATE).key(hashes.get(9));
            assertEquals(
                    PageStatus.OK,
                    store.delete(List.of(state), Deadline.after(Duration.ofSeconds(5)))
                            .get()
                            .status(0));
        }
        try (TestEngine third = TestEngine.hybrid(WAIT, 64, unclosable(store), MODEL)) {
            Served c = serve(third, "c", concat(a, prompt(6000, 8)));
            assertEquals(6, c.prefixPages());
            assertEquals(6, c.restoredPages());
        }
        store.close();
    }

    @Test
    void partsOfTheWrongShapeAreRefusedAndChangeNothing() throws Exception {
        try (TestEngine e = TestEngine.hybrid(settings(), 64, null, MODEL)) {
            int[] a = prompt(1000, 40);
            PageHashes hashes = e.hashes("", a);
            try (CacheRequest r = e.cache.request("a", a)) {
                int[] pages = r.allocate(10);
                PrefixParts good = parts(e, hashes, 10);
                PrefixParts oneWindowPage = new PrefixParts(good.windowPages().subList(1, 2), good.state());
                assertThrows(IllegalArgumentException.class, () -> r.commit(a, pages, true, oneWindowPage));
                PrefixParts noState = new PrefixParts(good.windowPages(), Optional.empty());
                assertThrows(IllegalArgumentException.class, () -> r.commit(a, pages, true, noState));
                int[] ragged = Arrays.copyOf(a, 38); // a state belongs to a page boundary
                assertThrows(
                        IllegalArgumentException.class,
                        () -> r.commit(ragged, Arrays.copyOf(pages, 9), true, parts(e, hashes, 9)));
                assertEquals(0, e.cache.stats().devicePages(), "a refused commit cached nothing");
                r.commit(a, pages, true, good);
            }
            assertEquals(1, e.cache.core().parts.endpoints());
        }
        try (TestEngine plain = new TestEngine(settings(), 64, null)) {
            int[] a = prompt(1000, 8);
            try (CacheRequest r = plain.cache.request("a", a)) {
                int[] pages = r.allocate(2);
                PrefixParts p = new PrefixParts(List.of(), Optional.of(arena.allocate(256)));
                assertThrows(IllegalArgumentException.class, () -> r.commit(a, pages, true, p));
                assertThrows(IllegalStateException.class, () -> r.restoreParts(p));
            }
        }
    }

    @Test
    void endsBeyondTheHostBudgetAreEvictedLeastRecentlyUsedButNeverWhileARequestUsesThem() throws Exception {
        // window pages of 32 bytes a token x 4 tokens = 128 bytes and 256-byte states, 512 bytes for each kind: 1 KiB
        // holds 2 ends of 2 window pages and a state
        try (TestEngine e = TestEngine.hybrid(settings("hicache-hybrid-host-bytes", "1KiB"), 64, null, MODEL)) {
            int[] a = prompt(1000, 16);
            int[] b = prompt(2000, 16);
            int[] c = prompt(3000, 16);
            serve(e, "a", a);
            serve(e, "b", b);
            try (CacheRequest holding = e.cache.request("hold-a", concat(a, prompt(9, 4)))) {
                assertEquals(16, holding.deviceTokens());
                serve(e, "c", c); // room for c: b goes, a is in use
                assertEquals(16, serve(e, "a2", concat(a, prompt(8, 4))).deviceTokens());
                assertEquals(0, serve(e, "b2", concat(b, prompt(8, 4))).deviceTokens(), "b's end was evicted");
            }
            assertEquals(2, e.cache.core().parts.endpoints());
            e.quiesce();
            e.cache.core().checkConsistency();
        }
    }
}
