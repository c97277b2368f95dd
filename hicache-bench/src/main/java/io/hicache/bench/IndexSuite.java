package io.hicache.bench;

import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.usage.PageUsageIndex.Claimed;
import io.hicache.core.usage.PageUsageIndex.Order;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;

/**
 * {@code index}: the page usage index ({@link PageUsageIndex}) at 10^7 entries, the size of a 100 GB slab of 16 KiB
 * pages, with random 64-bit keys (as page hashes are) and its order shuffled by touching every key once in random
 * order, so that walks and lookups go all over memory as a real cache's do.
 *
 * <ul>
 *   <li>Eviction: the time per evicted page (claim the oldest 64 pages, remove them; the pages are then inserted
 *       again, untimed, so the index stays full), at 10^7 entries against the same at 10^5, in alternating rounds.
 *       A sort of the index per pass, as the stores did before, would make the ratio grow with the size; the ratio
 *       that is left is what cache misses cost. To tell the two apart, a row of the machine's own growth: a walk of
 *       dependent random steps over records laid out as the index's (24 bytes each), 10^7 of them against 10^5.
 *   <li>Touches per second against {@code ConcurrentHashMap.get} then {@code put} of the same keys, in the same run:
 *       a map lookup and update, the least a recency index must do.
 *   <li>Heap bytes per entry, measured as the change in used heap (after full collections) from building the index,
 *       keys excluded (the caller holds them), without and with namespaces; the reference is what the stores' own
 *       indexes cost, a {@code ConcurrentHashMap} to an entry object with bytes and a last-use time.
 * </ul>
 *
 * Stateless; needs about 2 GB of heap (the JVM's default on a machine with 8 GB or more).
 */
public final class IndexSuite implements BenchSuite {
    private static final int BIG = 10_000_000;
    private static final int SMALL = 100_000;
    private static final long PAGE_BYTES = 16 * 1024;
    private static final int EVICT_BATCH_PAGES = 64;
    /** Touches per timed call: enough that the call itself costs nothing. */
    private static final int TOUCH_CHUNK = 1 << 16;

    private static final String[] NAMESPACES = {"ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7"};

    /** Results escape here so that the JIT cannot drop the work. */
    static volatile long sink;

    @Override
    public String name() {
        return "index";
    }

    @Override
    public String description() {
        return "page usage index at 10^7 pages: time per evicted page (vs 10^5), touches/s (vs ConcurrentHashMap "
                + "get+put), heap bytes per entry";
    }

    /** What the stores kept per page before: bytes and a last-use time, in a map. */
    private record OldEntry(long bytes, long lastUse) {}

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        int big = quick ? 1_000_000 : BIG;
        String size = big == BIG ? "10m" : big / 1_000_000 + "m";
        SplittableRandom random = new SplittableRandom(42);
        Long[] keys = randomKeys(big, random);
        List<BenchRow> rows = new ArrayList<>();

        long before = heapUsed();
        PageUsageIndex<Long> withNamespaces = PageUsageIndex.<Long>builder(Order.RECENCY)
                .namespaces(k -> NAMESPACES[(int) (k & 7)])
                .build();
        fill(withNamespaces, keys, big);
        double namespacedBytes = (double) (heapUsed() - before) / big;
        sink += withNamespaces.size();
        withNamespaces = null;

        before = heapUsed();
        PageUsageIndex<Long> index = PageUsageIndex.<Long>builder(Order.RECENCY).build();
        fill(index, keys, big);
        long afterIndex = heapUsed();
        double indexBytes = (double) (afterIndex - before) / big;
        ConcurrentHashMap<Long, OldEntry> map = new ConcurrentHashMap<>();
        for (int i = 0; i < big; i++) {
            map.put(keys[i], new OldEntry(PAGE_BYTES, i));
        }
        double mapBytes = (double) (heapUsed() - afterIndex) / big;
        String reference = "concurrent_hash_map_to_entry_object";
        rows.add(BenchRow.lowerIsBetter("heap_bytes_per_entry_" + size, indexBytes, "B", reference, mapBytes));
        rows.add(BenchRow.lowerIsBetter(
                "heap_bytes_per_entry_namespaces_" + size, namespacedBytes, "B", reference, mapBytes));

        rows.add(touches(index, map, keys, big, size, quick, random));
        map = null;
        shuffle(index, keys, big, random);

        PageUsageIndex<Long> small = PageUsageIndex.<Long>builder(Order.RECENCY).build();
        fill(small, keys, SMALL);
        shuffle(small, keys, SMALL, random);
        rows.add(evictions(index, small, size, quick));
        index = null;
        small = null;
        rows.add(randomWalk(big, size, quick, random));
        return rows;
    }

    private static BenchRow touches(
            PageUsageIndex<Long> index,
            ConcurrentHashMap<Long, OldEntry> map,
            Long[] keys,
            int n,
            String size,
            boolean quick,
            SplittableRandom random)
            throws Exception {
        int[] sequence = random.ints(1 << 22, 0, n).toArray();
        int seqMask = sequence.length - 1;
        int[] cursors = new int[2];
        Comparison.Result result = Comparison.forRun(quick)
                .measure(
                        () -> {
                            int at = cursors[0];
                            long hits = 0;
                            for (int i = 0; i < TOUCH_CHUNK; i++) {
                                hits += index.touch(keys[sequence[at++ & seqMask]]) ? 1 : 0;
                            }
                            cursors[0] = at;
                            sink += hits;
                            return TOUCH_CHUNK;
                        },
                        () -> {
                            int at = cursors[1];
                            long hits = 0;
                            for (int i = 0; i < TOUCH_CHUNK; i++) {
                                Long k = keys[sequence[at++ & seqMask]];
                                OldEntry e = Objects.requireNonNull(
                                        map.get(k)); // every key is in the map; no message: a measured loop
                                map.put(k, e);
                                hits += e.bytes();
                            }
                            cursors[1] = at;
                            sink += hits;
                            return TOUCH_CHUNK;
                        });
        return BenchRow.higherIsBetter(
                "touch_ops_" + size, "touches/s", "concurrent_hash_map_get_put_same_keys", result, 1);
    }

    /**
     * Time per evicted page in {@code big} against {@code small}: alternating rounds, each timing claims and
     * removals only; medians of the rounds and of their paired ratios.
     */
    private static BenchRow evictions(
            PageUsageIndex<Long> big, PageUsageIndex<Long> small, String size, boolean quick) {
        int warmup = quick ? 1 : 4;
        int rounds = quick ? 3 : 10;
        long roundNanos = quick ? 20_000_000L : 300_000_000L;
        for (int i = 0; i < warmup; i++) {
            evictRound(big, roundNanos);
            evictRound(small, roundNanos);
            Progress.roundDone(i + 1, warmup + rounds);
        }
        double[] b = new double[rounds];
        double[] s = new double[rounds];
        double[] ratios = new double[rounds];
        for (int i = 0; i < rounds; i++) {
            if (i % 2 == 0) {
                b[i] = evictRound(big, roundNanos);
                s[i] = evictRound(small, roundNanos);
            } else {
                s[i] = evictRound(small, roundNanos);
                b[i] = evictRound(big, roundNanos);
            }
            ratios[i] = b[i] / s[i];
            Progress.roundDone(warmup + i + 1, warmup + rounds);
        }
        return new BenchRow(
                "evict_per_page_" + size,
                Forks.median(b),
                "ns",
                "evict_per_page_100k",
                Forks.median(s),
                Forks.median(ratios),
                "lower");
    }

    /** Nanoseconds per page of claiming and removing the oldest pages, for about {@code nanos} of such work. */
    private static double evictRound(PageUsageIndex<Long> index, long nanos) {
        long timed = 0;
        long pages = 0;
        int size = index.size();
        while (timed < nanos) {
            long start = System.nanoTime();
            List<Claimed<Long>> claimed = index.claimOldest(EVICT_BATCH_PAGES * PAGE_BYTES);
            for (Claimed<Long> c : claimed) {
                index.removeEntry(c.entry());
            }
            timed += System.nanoTime() - start;
            pages += claimed.size();
            for (Claimed<Long> c : claimed) {
                index.insert(c.key(), PAGE_BYTES);
            }
        }
        if (index.size() != size) {
            throw new IllegalStateException("the index lost entries: " + index.size() + " of " + size);
        }
        return (double) timed / pages;
    }

    /**
     * Nanoseconds per step of a walk through {@code n} records of three longs, each step reading the next record's
     * number from the current one, in one random cycle (Sattolo's shuffle): a linked list's walk in the index's layout,
     * with nothing else. At 10^7 records against 10^5, in alternating rounds.
     */
    private static BenchRow randomWalk(int n, String size, boolean quick, SplittableRandom random) {
        long[] big = cycle(n, random);
        long[] small = cycle(SMALL, random);
        int rounds = quick ? 3 : 10;
        int steps = quick ? 1_000_000 : 5_000_000;
        double[] b = new double[rounds];
        double[] s = new double[rounds];
        double[] ratios = new double[rounds];
        walk(big, steps);
        walk(small, steps);
        for (int i = 0; i < rounds; i++) {
            if (i % 2 == 0) {
                b[i] = walk(big, steps);
                s[i] = walk(small, steps);
            } else {
                s[i] = walk(small, steps);
                b[i] = walk(big, steps);
            }
            ratios[i] = b[i] / s[i];
            Progress.roundDone(i + 1, rounds);
        }
        return new BenchRow(
                "random_walk_step_" + size,
                Forks.median(b),
                "ns",
                "random_walk_step_100k",
                Forks.median(s),
                Forks.median(ratios),
                "lower");
    }

    private static long[] cycle(int n, SplittableRandom random) {
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        for (int i = n - 1; i > 0; i--) {
            int j = random.nextInt(i); // Sattolo: j < i, so the permutation is one cycle
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        long[] records = new long[3 * n];
        for (int i = 0; i < n; i++) {
            records[3 * order[i]] = order[(i + 1) % n];
        }
        return records;
    }

    private static double walk(long[] records, int steps) {
        int at = 0;
        long start = System.nanoTime();
        for (int i = 0; i < steps; i++) {
            at = (int) records[3 * at];
        }
        long nanos = System.nanoTime() - start;
        sink += at;
        return (double) nanos / steps;
    }

    /** Random 64-bit keys: a repeat among 10^7 is all but impossible, and {@link #fill} would refuse one. */
    private static Long[] randomKeys(int n, SplittableRandom random) {
        Long[] keys = new Long[n];
        for (int i = 0; i < n; i++) {
            keys[i] = random.nextLong();
        }
        return keys;
    }

    private static void fill(PageUsageIndex<Long> index, Long[] keys, int n) {
        for (int i = 0; i < n; i++) {
            if (index.insert(keys[i], PAGE_BYTES) == PageUsageIndex.NO_ENTRY) {
                throw new IllegalStateException("duplicate key " + keys[i]);
            }
        }
    }

    /** Touches every key once in random order: the index's order becomes a random permutation of its slots. */
    private static void shuffle(PageUsageIndex<Long> index, Long[] keys, int n, SplittableRandom random) {
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        for (int i = n - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i : order) {
            index.touch(keys[i]);
        }
    }

    private static long heapUsed() {
        for (int i = 0; i < 2; i++) {
            System.gc();
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }
}
