package io.hicache.bench;

import io.hicache.core.cache.CacheRequest;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHasher;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.tree.EvictionPolicy;
import io.hicache.core.tree.MatchResult;
import io.hicache.core.tree.RadixTree;
import io.hicache.core.util.Checks;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * {@code tree}: the radix tree alone, with 1M tokens cached across many branches (64 shared system prompts of 1024
 * tokens, each with conversations of 2K and 32K tokens hanging off it), at pages of 1 and 64 tokens. Match latency
 * for cached 2K- and 32K-token sequences (median and 99th percentile of single calls), against comparing the same
 * tokens with {@code Arrays.equals} (the least any match must do); insert latency of a new 2K-token branch (mostly
 * hashing its pages, against hashing alone); and the tree's heap bytes per cached page (measured around building
 * it, after full collections); a request's commit through the cache against the bare tree's insert (see
 * {@link #commits}). Stateless.
 */
public final class TreeSuite implements BenchSuite {
    private static final int SYSTEM_PROMPTS = 64;
    private static final int SYSTEM_TOKENS = 1024;
    private static final long TARGET_TOKENS = 1_000_000;
    static volatile long sink;

    @Override
    public String name() {
        return "tree";
    }

    @Override
    public String description() {
        return "radix tree: match/insert latency (2K, 32K tokens) over 1M cached tokens; heap bytes per cached page";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new ArrayList<>();
        for (int page : new int[] {1, 64}) {
            measure(page, quick, rows);
        }
        // At 64 tokens a page, 1M tokens are only 15,625 pages: too few to weigh the heap to a byte per page. A
        // 16M-token tree (250,000 pages) gives the figure for that page size.
        if (!quick) {
            heapOnly(64, 16 * TARGET_TOKENS, rows);
        }
        commits(quick, rows);
        return rows;
    }

    private static void heapOnly(int page, long target, List<BenchRow> rows) {
        SplittableRandom random = new SplittableRandom(page * 31L);
        List<int[]> systems = new ArrayList<>();
        for (int i = 0; i < SYSTEM_PROMPTS; i++) {
            systems.add(tokens(random, SYSTEM_TOKENS));
        }
        long heapBefore = heapUsed();
        RadixTree tree = new RadixTree(page, EvictionPolicy.LRU);
        long cached = 0;
        for (int i = 0; cached < target; i++) {
            int[] seq = Arrays.copyOf(systems.get(i % SYSTEM_PROMPTS), 2048);
            int[] tail = tokens(random, 2048 - SYSTEM_TOKENS);
            System.arraycopy(tail, 0, seq, SYSTEM_TOKENS, tail.length);
            cached += (long) tree.insert(seq, new int[seq.length / page], 1).newPages() * page;
        }
        long heapAfter = heapUsed();
        rows.add(BenchRow.lowerIsBetter(
                "tree_heap_bytes_per_cached_page_p" + page + "_16m_tokens",
                (double) (heapAfter - heapBefore) / tree.devicePages(),
                "B",
                "budget_200_bytes_per_page",
                200));
        sink += tree.nodes();
    }

    private static void measure(int page, boolean quick, List<BenchRow> rows) {
        SplittableRandom random = new SplittableRandom(page);
        List<int[]> systems = new ArrayList<>();
        for (int i = 0; i < SYSTEM_PROMPTS; i++) {
            systems.add(tokens(random, SYSTEM_TOKENS));
        }
        long heapBefore = heapUsed();
        RadixTree tree = new RadixTree(page, EvictionPolicy.LRU);
        List<int[]> short2k = new ArrayList<>();
        List<int[]> long32k = new ArrayList<>();
        long cached = 0;
        int nextPage = 0;
        int i = 0;
        long target = quick ? TARGET_TOKENS / 10 : TARGET_TOKENS;
        while (cached < target) {
            int[] system = systems.get(i % SYSTEM_PROMPTS);
            int length = i % 16 == 15 ? 32 * 1024 : 2 * 1024;
            int[] seq = Arrays.copyOf(system, length);
            int[] tail = tokens(random, length - SYSTEM_TOKENS);
            System.arraycopy(tail, 0, seq, SYSTEM_TOKENS, tail.length);
            int pages = seq.length / page;
            int[] device = new int[pages];
            for (int p = 0; p < pages; p++) {
                device[p] = nextPage++;
            }
            RadixTree.InsertResult r = tree.insert(seq, device, 1);
            cached += (long) r.newPages() * page;
            (length == 2048 ? short2k : long32k).add(seq);
            i++;
        }
        long heapAfter = heapUsed();
        // The sequences kept for the match calls are the bench's, not the tree's: leave them out.
        long kept = 0;
        for (List<int[]> seqs : List.of(short2k, long32k)) {
            for (int[] s : seqs) {
                kept += 16 + (4L * s.length + 7) / 8 * 8 + 8;
            }
        }
        long treePages = tree.devicePages();
        double bytesPerPage = (double) Math.max(0, heapAfter - heapBefore - kept) / treePages;
        if (page == 1 || quick) {
            rows.add(BenchRow.lowerIsBetter(
                    "tree_heap_bytes_per_cached_page_p" + page, bytesPerPage, "B", "budget_200_bytes_per_page", 200));
        }
        // Token runs live off the heap: 4 bytes per token, stated for completeness (not a measurement).
        rows.add(BenchRow.lowerIsBetter(
                "tree_offheap_token_bytes_per_cached_page_p" + page,
                4.0 * page,
                "B",
                "budget_200_bytes_per_page",
                200));

        int calls = quick ? 2_000 : 200_000;
        for (List<int[]> seqs : List.of(short2k, long32k)) {
            String size = seqs == short2k ? "2k" : "32k";
            int n = seqs == short2k ? calls : calls / 16;
            double[] match = new double[n];
            double[] compare = new double[n];
            for (int c = 0; c < n + n / 10; c++) {
                int[] seq = seqs.get(random.nextInt(seqs.size()));
                int[] copy = seq.clone();
                long a = System.nanoTime();
                MatchResult m = tree.match(seq);
                long b = System.nanoTime();
                boolean same = Arrays.equals(seq, copy);
                long d = System.nanoTime();
                sink += m.devicePages() + (same ? 1 : 0);
                if (c >= n / 10) {
                    match[c - n / 10] = b - a;
                    compare[c - n / 10] = d - b;
                }
            }
            Arrays.sort(match);
            Arrays.sort(compare);
            rows.add(BenchRow.lowerIsBetter(
                    "tree_match_" + size + "_tokens_p" + page + "_median",
                    match[n / 2] / 1e3,
                    "us",
                    "arrays_equals_same_tokens_median",
                    compare[n / 2] / 1e3));
            rows.add(BenchRow.lowerIsBetter(
                    "tree_match_" + size + "_tokens_p" + page + "_p99",
                    match[(int) (n * 0.99)] / 1e3,
                    "us",
                    "arrays_equals_same_tokens_p99",
                    compare[(int) (n * 0.99)] / 1e3));
        }

        int inserts = quick ? 50 : 2_000;
        double[] insert = new double[inserts];
        double[] hash = new double[inserts];
        PageHasher hasher = new PageHasher(page);
        for (int c = 0; c < inserts; c++) {
            int[] seq = Arrays.copyOf(systems.get(c % SYSTEM_PROMPTS), 2048);
            int[] tail = tokens(random, 2048 - SYSTEM_TOKENS);
            System.arraycopy(tail, 0, seq, SYSTEM_TOKENS, tail.length);
            int[] device = new int[seq.length / page];
            long a = System.nanoTime();
            tree.insert(seq, device, 1);
            long b = System.nanoTime();
            sink += hasher.hashPages(tail, 0, tail.length - tail.length % page).size();
            long d = System.nanoTime();
            insert[c] = b - a;
            hash[c] = d - b;
        }
        Arrays.sort(insert);
        Arrays.sort(hash);
        rows.add(BenchRow.lowerIsBetter(
                "tree_insert_2k_tokens_new_branch_p" + page + "_median",
                insert[inserts / 2] / 1e3,
                "us",
                "hashing_its_new_pages_median",
                hash[inserts / 2] / 1e3));
    }

    /**
     * A request's commit through the cache (device only, emulated device, pages of 16 tokens) of a new 2K- and
     * 32K-token prompt, against inserting the same tokens into a bare tree: the commit adds its checks (the tokens
     * against the prompt, each page the request's own or its prefix's, no page twice) and its bookkeeping. Also the
     * checks' two scans alone ({@code Arrays.mismatch} over the tokens, {@code Checks.requireDistinct} over the pages),
     * against the commit.
     */
    private static void commits(boolean quick, List<BenchRow> rows) throws Exception {
        int page = 16;
        SplittableRandom random = new SplittableRandom(7);
        Settings settings = Settings.builder()
                .flag("page-size", Integer.toString(page))
                .flag("hicache-tiers", "device-only")
                .build();
        for (int length : new int[] {2048, 32 * 1024}) {
            int pages = length / page;
            int n = quick ? 50 : length == 2048 ? 5_000 : 500;
            double[] commit = new double[n];
            double[] insert = new double[n];
            double[] checks = new double[n];
            try (EmulatedDeviceRuntime device = new EmulatedDeviceRuntime(16L << 20, 1);
                    HiCache cache = HiCache.builder()
                            .config(HiCacheConfig.from(settings))
                            .namespace(Namespace.of("tree-bench", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                            .geometry(KvGeometry.mha(1, 1, 8, KvDtype.BFLOAT16))
                            .devicePages(4 * pages)
                            .runtime(device)
                            .open()) {
                RadixTree bare = new RadixTree(page, EvictionPolicy.LRU);
                for (int c = 0; c < n + n / 10; c++) {
                    int[] prompt = tokens(random, length);
                    long a;
                    long b;
                    try (CacheRequest r = cache.request("c" + c, prompt)) {
                        int[] own = r.allocate(pages);
                        a = System.nanoTime();
                        r.commit(prompt, own, true);
                        b = System.nanoTime();
                    }
                    int[] other = tokens(random, length);
                    int[] copy = other.clone();
                    int[] devicePages = new int[pages];
                    Arrays.setAll(devicePages, p -> p);
                    long d = System.nanoTime();
                    bare.insert(other, devicePages, 1);
                    long e = System.nanoTime();
                    sink += Arrays.mismatch(other, copy);
                    Checks.requireDistinct(devicePages, pages, "page");
                    long f = System.nanoTime();
                    if (c >= n / 10) {
                        commit[c - n / 10] = b - a;
                        insert[c - n / 10] = e - d;
                        checks[c - n / 10] = f - e;
                    }
                    if (bare.devicePages() > 64L * pages) {
                        bare = new RadixTree(page, EvictionPolicy.LRU);
                    }
                }
            }
            Arrays.sort(commit);
            Arrays.sort(insert);
            Arrays.sort(checks);
            String size = length == 2048 ? "2k" : "32k";
            rows.add(BenchRow.lowerIsBetter(
                    "cache_commit_" + size + "_tokens_p16_median",
                    commit[n / 2] / 1e3,
                    "us",
                    "tree_insert_same_tokens_median",
                    insert[n / 2] / 1e3));
            rows.add(BenchRow.lowerIsBetter(
                    "commit_checks_" + size + "_tokens_p16_median",
                    checks[n / 2] / 1e3,
                    "us",
                    "cache_commit_median",
                    commit[n / 2] / 1e3));
        }
    }

    private static int[] tokens(SplittableRandom random, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(152_064);
        }
        return t;
    }

    private static long heapUsed() {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }
}
