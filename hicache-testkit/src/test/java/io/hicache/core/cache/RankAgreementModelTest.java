package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHashes;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.rank.LocalRankGroup;
import io.hicache.core.rank.RankGroup;
import io.hicache.core.store.memory.InMemoryPageStore;
import io.hicache.core.tree.TreeNode;
import io.hicache.testkit.FaultyPageStore;
import io.hicache.testkit.PagePattern;
import io.hicache.testkit.SlowPageStore;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 19, part 2: tensor-parallel ranks whose caches share a rank group keep the same tree. 2 and 4 ranks, each a
 * thread with its own cache, run one script of random engine calls (open, prefetch check, load back, allocate and
 * commit, close, abort, an occasional flush) with different timings per rank: each rank's page store answers with
 * its own latency and fails calls and pages with its own seed, and each rank sleeps at random before its calls, so
 * copies, uploads and prefetches finish in a different order on every rank. After every step the ranks meet and the
 * test compares, rank against rank: the tree (structure, device pages, host presence, pins, copies in flight), the
 * free device pages, and what each call answered (hits per tier, prefetch ended or not, tokens loaded back, pages
 * allocated, PAGES_EXHAUSTED). Every rank also checks the bytes of every prefix it gets back. The seed is printed on
 * failure ({@code -Dhicache.rank-model.seed}).
 */
class RankAgreementModelTest {
    private static final int STEPS = Integer.getInteger("hicache.rank-model.steps", 3000);
    private static final int PAGE = 4;
    private static final KvGeometry MLA = KvGeometry.mla(2, 8, 4, KvDtype.BFLOAT16);
    /**
     * Runs the ranks without the group, each cache deciding alone: the test should then fail, which shows it can see
     * ranks that disagree (a check of the test, not of the cache).
     */
    private static final boolean ALONE = Boolean.getBoolean("hicache.rank-model.alone");

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 4})
    void ranksThatShareAGroupBuildTheSameTree(int ranks) throws Exception {
        long seed = Long.getLong("hicache.rank-model.seed", System.nanoTime());
        try {
            run(ranks, seed);
        } catch (Exception | AssertionError e) {
            throw new AssertionError(
                    "rank model test failed with seed " + seed + " (-Dhicache.rank-model.seed=" + seed + ")", e);
        }
    }

    private void run(int ranks, long seed) throws Exception {
        SplittableRandom script = new SplittableRandom(seed);
        Map<String, String> settings = new HashMap<>(Map.of(
                "page-size",
                Integer.toString(PAGE),
                "prefetch-threshold",
                "8",
                "hicache-ratio",
                "2",
                "hicache-storage-prefetch-policy",
                List.of("best_effort", "timeout", "wait_complete").get(script.nextInt(3)),
                "prefetch-timeout-base",
                "5ms",
                "hicache-write-policy",
                List.of("write_through", "write_through_selective", "write_back")
                        .get(script.nextInt(3)),
                "hicache-storage-timeout",
                "2s",
                "hicache-rank-timeout",
                "10s"));
        // each rank measures its own store's speed and fills its own upload queue: some runs make both matter
        settings.put(
                "hicache-recompute-tokens-per-second",
                List.of("0", "1000000", "100000000").get(script.nextInt(3)));
        settings.put("hicache-upload-queue-bytes", List.of("1GiB", "2KiB").get(script.nextInt(2)));
        boolean mla = script.nextBoolean(); // one copy of each page, uploaded by rank 0 alone, read by all
        List<RankGroup> groups = LocalRankGroup.create("model", ranks);
        // half the runs also reduce the store's hits on the prefetch query threads (SGLang's second group)
        List<RankGroup> queryGroups = script.nextBoolean() ? LocalRankGroup.create("model-prefetch", ranks) : null;
        InMemoryPageStore shared = new InMemoryPageStore(1L << 30); // the MLA ranks' one store
        String[] seen = new String[ranks];
        AtomicReference<String> divergence = new AtomicReference<>();
        int[] compared = new int[1];
        CyclicBarrier meet = new CyclicBarrier(ranks, () -> {
            compared[0]++;
            for (int r = 1; r < ranks && divergence.get() == null; r++) {
                if (!seen[r].equals(seen[0])) {
                    divergence.set("rank " + r + " differs from rank 0 after "
                            + seen[0].lines().findFirst().orElse("") + ":\n--- rank 0\n" + seen[0] + "\n--- rank " + r
                            + "\n" + seen[r]);
                }
            }
        });
        ExecutorService threads = Executors.newFixedThreadPool(ranks);
        try {
            List<Future<String>> results = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                int rank = r;
                results.add(threads.submit(() -> new Rank(
                                rank,
                                ranks,
                                seed,
                                settings,
                                groups.get(rank),
                                queryGroups == null ? null : queryGroups.get(rank),
                                mla ? shared : null)
                        .run(seen, meet, divergence)));
            }
            List<String> stats = new ArrayList<>();
            ExecutionException first = null;
            for (Future<String> f : results) {
                try {
                    stats.add(f.get(10, TimeUnit.MINUTES));
                } catch (ExecutionException e) {
                    if (first == null || (isEcho(first) && !isEcho(e))) {
                        first = e; // the rank that failed first, not the others its leaving failed
                    }
                }
            }
            if (first != null) {
                throw first;
            }
            assertEquals(null, divergence.get());
            assertEquals(STEPS + STEPS / 100 + 1, compared[0], "the ranks met after every step");
            System.out.println("rank model test: " + ranks + " ranks, " + STEPS + " steps, seed " + seed + ", "
                    + settings
                    + (mla ? ", MLA" : "") + (queryGroups != null ? ", hits reduced on the query threads" : "") + "; "
                    + String.join("; ", stats));
        } finally {
            threads.shutdownNow();
            for (RankGroup g : groups) {
                g.close();
            }
            if (queryGroups != null) {
                queryGroups.forEach(RankGroup::close);
            }
            shared.close();
        }
    }

    private static void dumpRankThreads() {
        Thread.getAllStackTraces().forEach((t, stack) -> {
            if (t.getName().startsWith("pool-")) {
                StringBuilder b = new StringBuilder("--- " + t.getName() + "\n");
                for (StackTraceElement e : stack) {
                    b.append("    at ").append(e).append('\n');
                }
                System.err.print(b);
            }
        });
    }

    private static boolean isEcho(ExecutionException e) {
        return e.getCause() instanceof HiCacheException h && h.getMessage().contains("left the group")
                || e.getCause() instanceof BrokenBarrierException;
    }

    /** One rank: its cache, its slow and faulty store, its own timing, and the script every rank follows. */
    private static final class Rank {
        private final int rank;
        private final SplittableRandom script;
        private final SplittableRandom timing;
        private final Map<String, String> settings;
        private final RankGroup group;
        private final RankGroup queryGroup;
        private final InMemoryPageStore shared;
        private final int ranks;
        private final long seed;

        Rank(
                int rank,
                int ranks,
                long seed,
                Map<String, String> settings,
                RankGroup group,
                RankGroup queryGroup,
                InMemoryPageStore shared) {
            this.rank = rank;
            this.ranks = ranks;
            this.seed = seed;
            this.script = new SplittableRandom(seed);
            this.timing = new SplittableRandom(seed * 31 + rank);
            this.settings = settings;
            this.group = group;
            this.queryGroup = queryGroup;
            this.shared = shared;
            script.nextInt(3); // the choices the run's set-up took
            script.nextInt(3);
            script.nextInt(3);
            script.nextInt(2);
            script.nextBoolean();
            script.nextBoolean();
        }

        String run(String[] seen, CyclicBarrier meet, AtomicReference<String> divergence) throws Exception {
            try {
                return serve(seen, meet, divergence);
            } catch (Exception | AssertionError e) {
                if (e instanceof HiCacheException h && h.getMessage().contains("until its deadline")) {
                    dumpRankThreads(); // where the rank it waited for is
                }
                group.close(); // the others' collectives fail at once instead of at their deadline
                if (queryGroup != null) {
                    queryGroup.close();
                }
                meet.reset();
                throw e;
            }
        }

        private String serve(String[] seen, CyclicBarrier meet, AtomicReference<String> divergence) throws Exception {
            FaultyPageStore faulty = new FaultyPageStore(
                    shared != null ? HiCacheTest.unclosable(shared) : new InMemoryPageStore(1L << 30),
                    0.03,
                    0.03,
                    seed + rank);
            SlowPageStore store = new SlowPageStore(faulty, 150L * rank, 20L * rank);
            Namespace ns = Namespace.of("rank-model", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, rank, ranks);
            List<int[]> library = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                library.add(HiCacheModelTest.randomTokens(script, 8 + script.nextInt(32)));
            }
            try (TestEngine engine = new TestEngine(
                            settings,
                            32,
                            store,
                            null,
                            shared != null ? MLA : TestEngine.GEOMETRY,
                            ns,
                            ALONE ? null : group,
                            ALONE ? null : queryGroup);
                    Arena arena = Arena.ofShared()) {
                MemorySegment flat = arena.allocate(engine.cache.format().pageBytes(), 64);
                List<Open> open = new ArrayList<>();
                int opened = 0;
                for (int step = 0; step <= STEPS && divergence.get() == null; step++) {
                    if (timing.nextInt(3) == 0) {
                        LockSupport.parkNanos(timing.nextInt(1_500_000)); // this rank is late to this call
                    }
                    StringBuilder said = new StringBuilder("step ").append(step).append(": ");
                    if (step == STEPS) {
                        said.append(endAll(engine, open));
                    } else {
                        int choice = script.nextInt(100);
                        if (open.isEmpty() || (choice < 25 && open.size() < 6)) {
                            int[] prompt = HiCacheModelTest.nextPrompt(script, library);
                            CacheRequest r = engine.cache.request("r" + opened++, prompt);
                            open.add(new Open(r, prompt));
                            said.append("open ")
                                    .append(r.id())
                                    .append(" device ")
                                    .append(r.deviceTokens())
                                    .append(" host ")
                                    .append(r.hostTokens());
                        } else if (choice == 99) {
                            CacheAdmin.Flushed f = engine.cache.admin().flush(Duration.ofSeconds(20));
                            said.append("flush ").append(f);
                        } else {
                            Open o = open.get(script.nextInt(open.size()));
                            said.append(o.r.id()).append(' ');
                            if (choice < 40) {
                                said.append("prefetch done ").append(o.r.tryEndPrefetch());
                            } else if (choice < 55) {
                                said.append(loadBack(
                                        o, script.nextInt(4) == 0 ? script.nextInt(64) : Integer.MAX_VALUE, engine));
                            } else if (choice < 80) {
                                said.append(commit(o, script, engine, flat));
                            } else {
                                RequestOutcome out = o.r.outcome();
                                said.append("close ")
                                        .append(out.deviceTokens())
                                        .append('/')
                                        .append(out.hostTokens())
                                        .append('/')
                                        .append(out.storeTokens())
                                        .append('/')
                                        .append(out.computedTokens());
                                if (choice < 90) {
                                    o.r.close();
                                } else {
                                    o.r.abort();
                                }
                                open.remove(o);
                            }
                        }
                    }
                    engine.cache.core().checkConsistency(false);
                    seen[rank] =
                            said.append('\n').append(snapshot(engine.cache)).toString();
                    meet.await(2, TimeUnit.MINUTES);
                    if (step % 100 == 99) {
                        quietPoint(engine, open, seen, meet);
                    }
                }
                if (divergence.get() != null) {
                    return "rank " + rank + " stopped where the ranks differ";
                }
                assertTrue(
                        engine.cache.nothingPinned(),
                        "rank " + rank + ": pages still pinned after every request ended");
                engine.cache.core().checkConsistency(true);
                CacheStats s = engine.cache.stats();
                // the script reaches every path that needs agreeing on (an MLA rank other than 0 writes nothing, so
                // its store may see too few calls to fail one)
                if (STEPS >= 1000) {
                    assertTrue(
                            s.loadsCompleted() > 0
                                    && s.prefetchesStarted() > 0
                                    && s.deviceEvictedPages() > 0
                                    && s.hostEvictedPages() > 0
                                    && (faulty.injected() > 0 || (shared != null && rank > 0)),
                            "rank " + rank + " did not exercise every path: " + s);
                }
                return "rank " + rank + ": " + opened + " requests, " + s.loadsCompleted() + " loads, "
                        + s.prefetchesStarted() + " prefetches, " + s.deviceEvictedPages() + " device evictions, "
                        + faulty.injected() + " store faults";
            }
        }

        /** Ends every prefetch (each check a collective), drains every rank's background work, and compares again. */
        private void quietPoint(TestEngine engine, List<Open> open, String[] seen, CyclicBarrier meet)
                throws Exception {
            StringBuilder said = new StringBuilder("quiet point:");
            for (Open o : open) {
                int checks = 1;
                while (!o.r.tryEndPrefetch()) {
                    Thread.sleep(1);
                    checks++;
                }
                said.append(' ')
                        .append(o.r.id())
                        .append(" ended after ")
                        .append(checks)
                        .append(" checks;");
            }
            said.append(" idle ").append(engine.cache.awaitIdle(Duration.ofSeconds(30)));
            engine.cache.core().checkConsistency(true);
            seen[rank] = said.append('\n').append(snapshot(engine.cache)).toString();
            meet.await(2, TimeUnit.MINUTES);
        }

        private static String endAll(TestEngine engine, List<Open> open) throws InterruptedException {
            for (Open o : open) {
                o.r.close();
            }
            open.clear();
            return "all closed, idle " + engine.cache.awaitIdle(Duration.ofSeconds(30));
        }
    }

    private record Open(CacheRequest r, int[] prompt) {}

    private static String loadBack(Open o, int budget, TestEngine engine) throws Exception {
        CacheRequest.LoadBack lb;
        try {
            lb = o.r.loadBack(budget);
        } catch (HiCacheException e) {
            return "load back " + e.code();
        }
        if (!lb.await(Duration.ofSeconds(10))) {
            throw new AssertionError("a load-back did not finish");
        }
        engine.verify(o.prompt, o.r.prefixPages());
        return "load back " + lb.deviceTokens() + " device tokens";
    }

    private static String commit(Open o, SplittableRandom script, TestEngine engine, MemorySegment flat) {
        int[] prefix = o.r.prefixPages();
        int whole = o.prompt.length / PAGE;
        int upTo = script.nextInt(3) == 0 ? prefix.length + script.nextInt(whole - prefix.length + 1) : whole;
        boolean finished = upTo == whole && script.nextBoolean();
        int[] fresh;
        try {
            fresh = o.r.allocate(upTo - prefix.length);
        } catch (HiCacheException e) {
            return "allocate " + (upTo - prefix.length) + ": " + e.code();
        }
        PageHashes hashes = engine.hashes("", o.prompt);
        for (int i = 0; i < fresh.length; i++) {
            PagePattern.fill(flat, engine.ns.key(hashes.get(prefix.length + i)));
            engine.cache.device().writePage(fresh[i], flat);
        }
        int[] all = Arrays.copyOf(prefix, upTo);
        System.arraycopy(fresh, 0, all, prefix.length, fresh.length);
        o.r.commit(Arrays.copyOf(o.prompt, upTo * PAGE), all, finished);
        return "commit " + upTo + " pages over a prefix of " + prefix.length + ", allocated " + Arrays.toString(fresh);
    }

    /** The tree as every rank must have it: structure, device pages, host presence, pins and copies in flight. */
    static String snapshot(HiCache cache) {
        cache.core().lock.lock();
        try {
            StringBuilder b = new StringBuilder();
            b.append("free device pages ")
                    .append(cache.core().pageAllocator.available())
                    .append(", free host slots ")
                    .append(cache.core().host.freeSlots())
                    .append(", held by prefetches ")
                    .append(cache.core().prefetcher.heldPages())
                    .append(", queued to agree on ")
                    .append(Arrays.toString(cache.core().agreement.queued()))
                    .append(", tree: ")
                    .append(cache.core().tree.devicePages())
                    .append(" device, ")
                    .append(cache.core().tree.hostPages())
                    .append(" host pages\n");
            describe(cache.core().tree.root(), 0, b);
            return b.toString();
        } finally {
            cache.core().lock.unlock();
        }
    }

    private static void describe(TreeNode n, int depth, StringBuilder b) {
        List<TreeNode> children = new ArrayList<>(n.children());
        children.sort(Comparator.comparing((TreeNode c) -> String.valueOf(c.extraKey()))
                .thenComparingInt(c -> c.token(0)));
        for (TreeNode c : children) {
            b.append("  ".repeat(depth))
                    .append(c.token(0))
                    .append("+")
                    .append(c.pages())
                    .append("p dev ")
                    .append(Arrays.toString(c.devicePages()))
                    .append(c.backedUp() ? " host" : "")
                    .append(c.hostSlots() != null && !c.backedUp() ? " host-pending" : "")
                    .append(" lock ")
                    .append(c.lockRef())
                    .append(" hostRef ")
                    .append(c.hostRef())
                    .append(c.pending() == null ? "" : c.pending().toHost() ? " backing-up" : " loading")
                    .append('\n');
            describe(c, depth + 1, b);
        }
    }
}
