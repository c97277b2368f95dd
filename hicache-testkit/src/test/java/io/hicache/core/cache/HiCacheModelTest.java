package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.hicache.core.HiCacheException;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.testkit.FaultyPageStore;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Thousands of random operations (open, prefetch check, load back, allocate and commit, close, abort) from several
 * interleaved requests against a real cache with small pools (so eviction runs all the time) and a page store that
 * fails calls and pages at random, checked against a simple model after every step:
 *
 * <ul>
 *   <li>the cache never claims a page no request ever committed (the model keeps the set of committed page keys);
 *   <li>every page a request gets back, from any tier, has the bytes that were committed for its key;
 *   <li>the tree's invariants hold (evicted nodes form a suffix of every path, pins are never negative and cover
 *       their children), every device page has exactly one owner, and, at the quiet points every few hundred
 *       steps, every host slot too;
 *   <li>when every request has ended, nothing is pinned and nothing leaked.
 * </ul>
 *
 * The seed is printed on failure so a run can be replayed.
 */
class HiCacheModelTest {
    private static final int OPERATIONS = Integer.getInteger("hicache.model.operations", 100_000);
    private static final int PAGE = 4;

    @Test
    void randomOperationsAgainstTheModel() throws Exception {
        long seed = Long.getLong("hicache.model.seed", System.nanoTime());
        try {
            run(seed);
        } catch (AssertionError | RuntimeException e) {
            throw new AssertionError("model test failed with seed " + seed + " (-Dhicache.model.seed=" + seed + ")", e);
        }
    }

    private void run(long seed) throws Exception {
        SplittableRandom random = new SplittableRandom(seed);
        InMemoryPageStore inner = new InMemoryPageStore(1L << 30);
        FaultyPageStore store = new FaultyPageStore(inner, 0.02, 0.02, seed);
        Map<String, String> settings = Map.of(
                "page-size",
                Integer.toString(PAGE),
                "prefetch-threshold",
                "8",
                "hicache-ratio",
                "3",
                "hicache-storage-prefetch-policy",
                random.nextBoolean() ? "best_effort" : "timeout",
                "prefetch-timeout-base",
                "20ms",
                "hicache-write-policy",
                List.of("write_through", "write_through_selective", "write_back")
                        .get(random.nextInt(3)),
                "hicache-storage-timeout",
                "2s");
        PageHasher hasher = new PageHasher(PAGE);
        Set<String> committed = new HashSet<>();
        List<int[]> library = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            library.add(randomTokens(random, 8 + random.nextInt(32)));
        }
        try (TestEngine engine = new TestEngine(settings, 48, store);
                Arena arena = Arena.ofShared()) {
            HiCache cache = engine.cache;
            MemorySegment flat = arena.allocate(cache.format().pageBytes(), 64);
            List<Open> open = new ArrayList<>();
            int opened = 0;
            for (int step = 0; step < OPERATIONS; step++) {
                int choice = random.nextInt(100);
                if (open.isEmpty() || (choice < 25 && open.size() < 6)) {
                    int[] prompt = nextPrompt(random, library);
                    CacheRequest r = cache.request("r" + opened++, prompt);
                    Open o = new Open(r, prompt);
                    checkClaims(o, hasher, committed);
                    engine.verify(prompt, r.prefixPages()); // a device hit holds the bytes of its own tokens
                    open.add(o);
                } else {
                    Open o = open.get(random.nextInt(open.size()));
                    if (choice < 40) {
                        o.r.tryEndPrefetch();
                    } else if (choice < 55) {
                        loadBack(o, random, engine);
                    } else if (choice < 60) {
                        badCommit(o, random, cache);
                    } else if (choice < 80) {
                        try {
                            commit(o, random, cache, hasher, flat, committed);
                        } catch (HiCacheException full) {
                            // the pool is pinned by the other open requests: a real outcome, not a failure
                        }
                    } else {
                        if (choice < 90) {
                            o.r.close();
                        } else {
                            o.r.abort();
                        }
                        open.remove(o);
                    }
                }
                cache.core().checkConsistency(false);
                if (step % 500 == 499) {
                    quietCheck(engine, open);
                }
            }
            for (Open o : open) {
                o.r.close();
            }
            engine.quiesce();
            cache.core().checkConsistency(true);
            assertTrue(cache.nothingPinned(), "pages are still pinned after every request ended");
            assertEquals(0, cache.core().openRequests().size());
            CacheStats s = cache.stats();
            System.out.println("model test: " + OPERATIONS + " operations, " + opened + " requests, seed " + seed
                    + ", faults injected " + store.injected() + "; " + s);
            assertTrue(s.loadsCompleted() > 0 || OPERATIONS < 1000, "no load-back ran: " + s);
            assertTrue(s.prefetchesStarted() > 0 || OPERATIONS < 1000, "no prefetch ran: " + s);
            assertTrue(
                    s.deviceEvictedPages() + s.deviceDeletedPages() > 0 || OPERATIONS < 1000, "no eviction ran: " + s);
            assertTrue(store.injected() > 0 || OPERATIONS < 1000, "no fault was injected");
        }
    }

    /** The open requests are paused (none closes here) while the loops drain; then everything is accounted for. */
    private static void quietCheck(TestEngine engine, List<Open> open) throws InterruptedException {
        for (Open o : open) {
            // End prefetches so that the host slots they hold are accounted to the tree.
            long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (!o.r.tryEndPrefetch()) {
                if (System.nanoTime() > until) {
                    fail("a prefetch did not end within 5 s");
                }
                Thread.sleep(1);
            }
        }
        engine.quiesce();
        engine.cache.core().checkConsistency(true);
    }

    private static void loadBack(Open o, SplittableRandom random, TestEngine engine) throws Exception {
        int budget = random.nextInt(4) == 0 ? random.nextInt(64) : Integer.MAX_VALUE;
        CacheRequest.LoadBack lb;
        try {
            lb = o.r.loadBack(budget);
        } catch (HiCacheException full) {
            return; // no device room left by the other requests' pins
        }
        if (!lb.await(Duration.ofSeconds(10))) {
            fail("a load-back did not finish");
        }
        engine.verify(o.prompt, o.r.prefixPages());
    }

    /** Computes the uncached rest of the prompt (or a chunk of it) and commits it, finished or not. */
    private static void commit(
            Open o,
            SplittableRandom random,
            HiCache cache,
            PageHasher hasher,
            MemorySegment flat,
            Set<String> committed) {
        int[] prefix = o.r.prefixPages();
        int whole = o.prompt.length / PAGE;
        int upTo = random.nextInt(3) == 0 ? prefix.length + random.nextInt(whole - prefix.length + 1) : whole;
        int[] fresh = o.r.allocate(upTo - prefix.length);
        PageHashes hashes = hasher.hashPages(o.prompt);
        for (int i = 0; i < fresh.length; i++) {
            PagePattern.fill(flat, cache.namespace().key(hashes.get(prefix.length + i)));
            cache.device().writePage(fresh[i], flat);
        }
        int[] all = Arrays.copyOf(prefix, upTo);
        System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
        o.r.commit(Arrays.copyOf(o.prompt, upTo * PAGE), all, upTo == whole && random.nextBoolean());
        for (int i = 0; i < upTo; i++) {
            committed.add(hashes.get(i).toHex());
        }
    }

    /**
     * A commit the cache must refuse, changing nothing: the request's computed pages under tokens that are not its
     * prompt's, the cached prefix's pages under tokens whose first page differs, or one page listed twice.
     */
    private static void badCommit(Open o, SplittableRandom random, HiCache cache) {
        int[] prefix = o.r.prefixPages();
        int whole = o.prompt.length / PAGE;
        int[] fresh;
        try {
            fresh = o.r.allocate(whole - prefix.length);
        } catch (HiCacheException full) {
            return;
        }
        int[] pages = Arrays.copyOf(prefix, whole);
        System.arraycopy(fresh, 0, pages, prefix.length, fresh.length);
        int[] tokens = Arrays.copyOf(o.prompt, whole * PAGE);
        int kind = random.nextInt(3);
        if (kind == 0 && whole > 0) {
            int at = random.nextInt(tokens.length);
            tokens[at] = tokens[at] == 7 ? 8 : 7; // other tokens, the same pages
        } else if (kind == 1 && prefix.length > 0) {
            tokens[random.nextInt(PAGE)] ^= 0x4000; // the prefix's pages under a first page that differs
        } else if (whole > 1) {
            int from = random.nextInt(whole);
            int to = (from + 1 + random.nextInt(whole - 1)) % whole;
            pages[to] = pages[from]; // a page listed twice
        } else {
            return;
        }
        Set<Integer> before = Set.copyOf(o.r.ownedPages());
        try {
            o.r.commit(tokens, pages, random.nextBoolean());
            fail("a bad commit (kind " + kind + ") was accepted: " + Arrays.toString(pages));
        } catch (IllegalArgumentException refused) {
            // as it must be
        }
        assertEquals(before, Set.copyOf(o.r.ownedPages()), "a refused commit changed what the request owns");
        cache.core().checkConsistency(false);
    }

    /** The cache may claim only pages some request committed. */
    private static void checkClaims(Open o, PageHasher hasher, Set<String> committed) {
        int claimed = (o.r.deviceTokens() + o.r.hostTokens()) / PAGE;
        PageHashes hashes = hasher.hashPages(o.prompt);
        for (int i = 0; i < claimed; i++) {
            if (!committed.contains(hashes.get(i).toHex())) {
                fail("the cache claims page " + i + " of a prompt, which no request committed");
            }
        }
    }

    /** A prompt from {@code library}: a conversation, maybe cut short, maybe with new tokens; it may join the library. */
    static int[] nextPrompt(SplittableRandom random, List<int[]> library) {
        int[] base = library.get(random.nextInt(library.size()));
        int keep = random.nextInt(4) == 0 ? random.nextInt(base.length + 1) : base.length;
        int[] extra = randomTokens(random, random.nextInt(4) == 0 ? 0 : random.nextInt(24));
        int[] prompt = TestEngine.concat(Arrays.copyOf(base, keep), extra);
        if (random.nextInt(8) == 0) {
            library.set(random.nextInt(library.size()), prompt); // conversations grow
        }
        return prompt;
    }

    static int[] randomTokens(SplittableRandom random, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(50);
        }
        return t;
    }

    private record Open(CacheRequest r, int[] prompt) {}
}
