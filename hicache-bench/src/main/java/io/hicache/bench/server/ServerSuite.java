package io.hicache.bench.server;

import io.hicache.bench.BenchRow;
import io.hicache.bench.BenchSuite;
import io.hicache.bench.Progress;
import io.hicache.bench.ServerProcess;
import io.hicache.core.store.PageChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.jspecify.annotations.Nullable;

/**
 * {@code server}: the daemon against Redis 7 and memcached on loopback, each in its own process with nothing written
 * to disk (the daemon with no L3 store, Redis with persistence off), driven by one load generator: 16 connections
 * with 4 requests in flight on each. memcached runs with as many threads ({@code -t}) as the daemon has event loops,
 * items up to 2 MiB and 4 GiB of memory. Where the system's TCP congestion control is not cubic and cubic may be
 * chosen, a second daemon with {@code --server.tcp-congestion cubic} runs the same rounds, for the {@code _cubic}
 * rows against the same memcached ({@link #TUNED_CONGESTION}); the daemon's sets run again on connections whose PUTs
 * are flagged {@code UNCHECKED}, for the {@code _unchecked} rows ({@link #UNCHECKED}). For 64 KiB and 1 MiB pages,
 * after eight warm-up rounds (the daemon is a fresh JVM whose JIT compiler needs them; the peers get the same rounds),
 * six rounds rotate which server goes first; a round sets 512 MiB of fresh pages, gets as many at random among them,
 * and flushes the server (untimed; memcached's pages are deleted first, see {@link MemcacheProtocol#delete}). Then the
 * same-host rows ({@link SameHostRows}), and the scale rows: a daemon with an 8 GiB slab, evicting or not
 * ({@link EvictingRows}). Throughput is the median over rounds with the median of the paired rounds' ratios; latencies
 * are percentiles over every request of the measured rounds. Before timing, each server's answer to one get is checked
 * byte for byte against what was set. Stateless; the servers go when the suite ends.
 */
public final class ServerSuite implements BenchSuite {
    static final int CONNECTIONS = 16;
    static final int DEPTH = 4;
    static final int[] PAGE_BYTES = {64 * 1024, 1024 * 1024};
    private static final long ROUND_BYTES = 512L << 20;
    private static final int BODIES = 8;
    /**
     * memcached's item memory: a round's pages of each size (memory a slab class once took stays with it) with room
     * for its chunk rounding, and as much again: with 4 rounds' worth, one run of 15 in a sitting lost a page between
     * its get and its delete (memcached answered the delete NOT_FOUND: an eviction; likely its slab rebalancer, which
     * evicts what lies in the slab pages it moves between classes, not confirmed). Memory memcached does not touch
     * costs it nothing.
     */
    private static final long MEMCACHED_MEMORY_BYTES = 8 * ROUND_BYTES;
    /** memcached's largest item ({@code -I}): a 1 MiB page with its key and item header does not fit 1 MiB. */
    private static final long MEMCACHED_MAX_ITEM_BYTES = 2L << 20;
    /**
     * The congestion control of the second daemon: BBR, a common system default, paces every send with a timer even
     * on loopback, which costs the daemon's batched answers more than memcached's (docs/benchmarks.md).
     */
    static final String TUNED_CONGESTION = "cubic";
    /**
     * The variant of the daemon's sets whose PUTs are flagged {@code UNCHECKED} (docs/protocol.md §3 PUT: stored with
     * the client's CRC-32C, readers check): the same daemon, its own connections, sets only.
     */
    static final String UNCHECKED = "unchecked";
    /** Against memcached: at least its throughput, at most its p99. */
    private static final double PEER_AIM = 1.0;

    @Override
    public String name() {
        return "server";
    }

    @Override
    public String description() {
        return "daemon vs Redis 7 and memcached on loopback: 16 connections x 4 pipelined, set/get of 64 KiB and "
                + "1 MiB pages, GB/s and p50/p99; same-host leases vs memcpy, RESERVE/COMMIT vs TCP put; 16 KiB puts "
                + "into an 8 GiB slab, evicting vs not";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        List<BenchRow> rows = new ArrayList<>();
        if (EvictingRows.only()) {
            EvictingRows.run(quick, rows);
            return rows;
        }
        if (RespRows.only()) {
            RespRows.run(quick, rows);
            return rows;
        }
        if (RouterRows.only()) {
            RouterRows.run(quick, rows);
            return rows;
        }
        int threads = daemonEventLoops();
        boolean probe = Boolean.getBoolean("hicache.bench.server.cpuProbe");
        boolean tune = !probe && tunedCongestionApplies();
        List<String> tunedFlags = new ArrayList<>(daemonFlags());
        tunedFlags.addAll(List.of("--server.tcp-congestion", TUNED_CONGESTION));
        try (ServerProcess redis = ServerProcess.redis();
                ServerProcess daemon = ServerProcess.hicache(2 * ROUND_BYTES, daemonFlags());
                ServerProcess memcached =
                        ServerProcess.memcached(threads, MEMCACHED_MEMORY_BYTES >> 20, MEMCACHED_MAX_ITEM_BYTES);
                ServerProcess tuned = tune ? ServerProcess.hicache(2 * ROUND_BYTES, tunedFlags) : null;
                LoadGenerator toRedis = LoadGenerator.connect(new RespProtocol(), redis.port, CONNECTIONS, DEPTH);
                LoadGenerator toDaemon = LoadGenerator.connect(new HcwpProtocol(), daemon.port, CONNECTIONS, DEPTH);
                LoadGenerator toMemcached =
                        LoadGenerator.connect(new MemcacheProtocol(), memcached.port, CONNECTIONS, DEPTH);
                LoadGenerator toTuned = tuned == null
                        ? null
                        : LoadGenerator.connect(new HcwpProtocol(), tuned.port, CONNECTIONS, DEPTH);
                LoadGenerator toUnchecked =
                        probe ? null : LoadGenerator.connect(new HcwpProtocol(true), daemon.port, CONNECTIONS, DEPTH)) {
            List<Side> all = new ArrayList<>(List.of(
                    new Side(daemon, new HcwpProtocol(), toDaemon, ""),
                    new Side(redis, new RespProtocol(), toRedis, ""),
                    new Side(memcached, new MemcacheProtocol(), toMemcached, "")));
            if (tuned != null && toTuned != null) {
                all.add(new Side(tuned, new HcwpProtocol(), toTuned, TUNED_CONGESTION));
            }
            if (toUnchecked != null) {
                all.add(new Side(daemon, new HcwpProtocol(true), toUnchecked, UNCHECKED));
            }
            Side[] sides = all.toArray(Side[]::new);
            if (probe) {
                cpuProbe(sides);
                return rows;
            }
            for (int pageBytes : PAGE_BYTES) {
                size(sides, pageBytes, quick, rows);
            }
            if (peersOnly()) {
                return rows;
            }
            SameHostRows.run(daemon.port, quick, rows);
        }
        RespRows.run(quick, rows); // the daemon's Redis protocol against Redis, by the generator and redis-benchmark
        RouterRows.run(quick, rows); // PREFIX_HITS against Redis's EXISTS; TLS against plaintext
        EvictingRows.run(quick, rows); // after the servers above are gone: its slab wants their memory
        return rows;
    }

    /**
     * {@code -Dhicache.bench.server.peersOnly=true}: only the rows against Redis and memcached (set and get of 64 KiB
     * and 1 MiB), for a short run while working on the daemon's data path.
     */
    static boolean peersOnly() {
        return Boolean.getBoolean("hicache.bench.server.peersOnly");
    }

    /**
     * {@code -Dhicache.bench.server.daemonFlags="--server.put-into-slab false"}: settings added to the daemon's command
     * line, for a diagnostic run against another setting (not for committed rows: their daemon runs its defaults).
     */
    private static List<String> daemonFlags() {
        String flags =
                System.getProperty("hicache.bench.server.daemonFlags", "").trim();
        return flags.isEmpty() ? List.of() : List.of(flags.split("\\s+"));
    }

    /**
     * {@code -Dhicache.bench.server.cpuProbe=true}, a diagnostic (no rows): each server alone, rounds of 512 MiB of
     * fresh 64 KiB and 1 MiB sets then gets, with the CPU time the server process and this (the generator's) process
     * used in each phase: where the CPU of two shared cores goes for each server. Each line ends with the phases' times
     * on the monotonic clock ({@code System.nanoTime} on Linux), so that a profile taken with {@code perf record -k mono}
     * can be cut by phase.
     */
    private static void cpuProbe(Side[] sides) throws Exception {
        for (int pageBytes : PAGE_BYTES) {
            int pages = (int) (ROUND_BYTES / pageBytes);
            ByteBuf[] bodies = new ByteBuf[1];
            int[] crcs = randomBodies(pageBytes, bodies);
            try {
                for (int r = 0; r < 6; r++) {
                    for (Side s : sides) {
                        long round = ((long) pageBytes << 20) | r;
                        long server0 = s.server.cpuNanos();
                        long me0 = generatorCpuNanos();
                        long t0 = System.nanoTime();
                        LoadGenerator.Phase set = s.set(pages, round, bodies, crcs);
                        long server1 = s.server.cpuNanos();
                        long me1 = generatorCpuNanos();
                        long t1 = System.nanoTime();
                        LoadGenerator.Phase get = s.get(pages, round, pageBytes, null);
                        long server2 = s.server.cpuNanos();
                        long me2 = generatorCpuNanos();
                        long t2 = System.nanoTime();
                        s.clear(pages, round);
                        double gb = (double) pages * pageBytes / 1e9;
                        System.err.printf(
                                Locale.ROOT,
                                "cpu probe %s %d KiB round %d: set %.2f GB/s, server %.2f / generator %.2f CPU s per GB"
                                        + " (wall %.2f s per GB); get %.2f GB/s, server %.2f / generator %.2f CPU s"
                                        + " per GB (wall %.2f) [monotonic s: set %.3f-%.3f, get %.3f-%.3f]%n",
                                s.server.name,
                                pageBytes >> 10,
                                r,
                                gb / (set.nanos() / 1e9),
                                (server1 - server0) / 1e9 / gb,
                                (me1 - me0) / 1e9 / gb,
                                set.nanos() / 1e9 / gb,
                                gb / (get.nanos() / 1e9),
                                (server2 - server1) / 1e9 / gb,
                                (me2 - me1) / 1e9 / gb,
                                get.nanos() / 1e9 / gb,
                                t0 / 1e9,
                                t1 / 1e9,
                                t1 / 1e9,
                                t2 / 1e9);
                    }
                }
            } finally {
                bodies[0].release();
            }
        }
    }

    /** Sets {@code pages} pages of {@code round} through {@code load}, page i's body {@code bodies[i % length]}. */
    static LoadGenerator.Phase setRound(
            LoadGenerator load, LoadProtocol protocol, long round, int pages, ByteBuf[] bodies, int[] crcs)
            throws Exception {
        return load.run(
                pages,
                (alloc, id, index) -> protocol.set(
                        alloc,
                        id,
                        LoadProtocol.PageKey.of(round, index),
                        bodies[index % bodies.length].retainedDuplicate(),
                        crcs[index % bodies.length]));
    }

    /** Fills {@code bodies} with fresh direct buffers of random bytes (seeded by the page size); their CRC-32C. */
    static int[] randomBodies(int pageBytes, ByteBuf[] bodies) {
        int[] crcs = new int[bodies.length];
        SplittableRandom random = new SplittableRandom(pageBytes);
        for (int b = 0; b < bodies.length; b++) {
            bodies[b] = Unpooled.directBuffer(pageBytes);
            while (bodies[b].isWritable(8)) {
                bodies[b].writeLong(random.nextLong());
            }
            crcs[b] = PageChecksum.of(MemorySegment.ofBuffer(bodies[b].nioBuffer()));
        }
        return crcs;
    }

    /** CPU time this process (the load generator) has used so far, all its threads. */
    private static long generatorCpuNanos() {
        return ProcessHandle.current().info().totalCpuDuration().orElseThrow().toNanos();
    }

    /**
     * Whether the second daemon runs: the system's congestion control is not {@link #TUNED_CONGESTION} and this user
     * may choose that one ({@code /proc/sys/net/ipv4}); false off Linux.
     */
    static boolean tunedCongestionApplies() {
        try {
            Path proc = Path.of("/proc/sys/net/ipv4");
            String system =
                    Files.readString(proc.resolve("tcp_congestion_control")).trim();
            List<String> allowed = List.of(Files.readString(proc.resolve("tcp_allowed_congestion_control"))
                    .trim()
                    .split("\\s+"));
            return !system.equals(TUNED_CONGESTION) && allowed.contains(TUNED_CONGESTION);
        } catch (IOException e) {
            return false;
        }
    }

    /** The daemon's event loop threads at its defaults ({@code server.io-threads} 0: one per two cores). */
    static int daemonEventLoops() {
        return Math.max(1, Runtime.getRuntime().availableProcessors() / 2);
    }

    /** One server with its generator, and what was measured of it at one page size. */
    private static final class Side {
        final ServerProcess server;
        final LoadProtocol protocol;
        final LoadGenerator load;
        /** "" for the three servers; else the suffix of the daemon's extra rows ({@code cubic}, {@code unchecked}). */
        final String variant;

        final List<Double> setGbps = new ArrayList<>();
        final List<Double> getGbps = new ArrayList<>();
        final List<long[]> setLatency = new ArrayList<>();
        final List<long[]> getLatency = new ArrayList<>();

        Side(ServerProcess server, LoadProtocol protocol, LoadGenerator load, String variant) {
            this.server = server;
            this.protocol = protocol;
            this.load = load;
            this.variant = variant;
        }

        /** Sets the round's {@code pages}, page i's body {@code bodies[i % bodies.length]}. */
        LoadGenerator.Phase set(int pages, long round, ByteBuf[] bodies, int[] crcs) throws Exception {
            return setRound(load, protocol, round, pages, bodies, crcs);
        }

        /** Gets the round's {@code pages}, in {@code order} (page indexes), or in index order when it is null. */
        LoadGenerator.Phase get(int pages, long round, int pageBytes, int @Nullable [] order) throws Exception {
            return load.run(pages, (alloc, id, index) -> new ByteBuf[] {
                protocol.get(alloc, id, LoadProtocol.PageKey.of(round, order == null ? index : order[index]), pageBytes)
            });
        }

        /** Empties the server for the next round. */
        void clear(int pages, long round) throws Exception {
            if (protocol instanceof MemcacheProtocol m) { // flush_all would not give the memory back
                load.run(pages, (alloc, id, index) ->
                        new ByteBuf[] {m.delete(alloc, id, LoadProtocol.PageKey.of(round, index))});
            }
            load.run(1, (alloc, id, index) -> new ByteBuf[] {protocol.flushAll(alloc, id)});
        }

        void reset() {
            setGbps.clear();
            getGbps.clear();
            setLatency.clear();
            getLatency.clear();
        }
    }

    private static void size(Side[] sides, int pageBytes, boolean quick, List<BenchRow> rows) throws Exception {
        int pages = (int) ((quick ? ROUND_BYTES / 32 : ROUND_BYTES) / pageBytes);
        int warmup = quick ? 1 : 8; // the daemon is a fresh JVM: its JIT needs several rounds
        int rounds = quick ? 1 : 6;
        ByteBuf[] bodies = new ByteBuf[BODIES];
        int[] crcs = randomBodies(pageBytes, bodies);
        try {
            for (Side s : sides) {
                s.reset();
                PageCheck.verify(s.server.name, s.server.port, s.load, s.protocol, bodies[1], crcs[1]);
            }
            for (int r = 0; r < warmup + rounds; r++) {
                long round = ((long) pageBytes << 16) | r;
                int[] order = new SplittableRandom(round).ints(pages, 0, pages).toArray();
                for (int i = 0; i < sides.length; i++) {
                    Side s = sides[(i + r) % sides.length]; // alternate who goes first
                    LoadGenerator.Phase set = s.set(pages, round, bodies, crcs);
                    LoadGenerator.Phase get =
                            s.variant.equals(UNCHECKED) ? null : s.get(pages, round, pageBytes, order);
                    s.clear(pages, round);
                    if (r >= warmup) {
                        s.setGbps.add((double) pages * pageBytes / set.nanos());
                        s.setLatency.add(set.latencyNanos());
                        if (get != null) {
                            s.getGbps.add((double) pages * pageBytes / get.nanos());
                            s.getLatency.add(get.latencyNanos());
                        }
                    }
                }
                Progress.roundDone(r + 1, warmup + rounds);
            }
        } finally {
            for (ByteBuf b : bodies) {
                b.release();
            }
        }
        String size = pageBytes >= (1 << 20) ? (pageBytes >> 20) + "m" : (pageBytes >> 10) + "k";
        Side mine = sides[0];
        Side redis = sides[1];
        String reference = "redis_" + redis.server.version;
        rows.add(throughput("server_set_" + size, mine.setGbps, redis.setGbps, reference));
        rows.add(throughput("server_get_" + size, mine.getGbps, redis.getGbps, reference));
        latency("server_set_" + size, mine.setLatency, redis.setLatency, reference, rows);
        latency("server_get_" + size, mine.getLatency, redis.getLatency, reference, rows);
        Side memcached = sides[2];
        reference = "memcached_" + memcached.server.version;
        for (String op : new String[] {"get", "set"}) {
            boolean get = op.equals("get");
            String metric = "server_vs_memcached_" + op + "_" + size;
            for (BenchRow r : againstPeer(metric, mine, memcached, get, reference)) {
                rows.add(r.metric().endsWith("_p50") ? r : r.withAim(PEER_AIM));
            }
            // The daemon's variants: no aims (the rows above carry them), no p50. UNCHECKED changes only sets.
            for (int i = 3; i < sides.length; i++) {
                Side variant = sides[i];
                if (get && variant.variant.equals(UNCHECKED)) {
                    continue;
                }
                for (BenchRow r : againstPeer(metric + "_" + variant.variant, variant, memcached, get, reference)) {
                    if (!r.metric().endsWith("_p50")) {
                        rows.add(r);
                    }
                }
            }
        }
    }

    /** {@code mine} against {@code peer} in its gets or sets: throughput, then p50 and p99. */
    private static List<BenchRow> againstPeer(String metric, Side mine, Side peer, boolean get, String reference) {
        List<BenchRow> out = new ArrayList<>();
        out.add(throughput(metric, get ? mine.getGbps : mine.setGbps, get ? peer.getGbps : peer.setGbps, reference));
        latency(
                metric,
                get ? mine.getLatency : mine.setLatency,
                get ? peer.getLatency : peer.setLatency,
                reference,
                out);
        return out;
    }

    private static BenchRow throughput(String metric, List<Double> mine, List<Double> theirs, String reference) {
        double[] ratios = new double[mine.size()];
        for (int i = 0; i < ratios.length; i++) {
            ratios[i] = mine.get(i) / theirs.get(i);
        }
        return new BenchRow(metric, median(mine), "GB/s", reference, median(theirs), median(ratios), "higher");
    }

    private static void latency(
            String metric, List<long[]> mine, List<long[]> theirs, String reference, List<BenchRow> rows) {
        long[] a = pooled(mine);
        long[] b = pooled(theirs);
        for (double p : new double[] {0.50, 0.99}) {
            String name = metric + "_p" + Math.round(p * 100);
            rows.add(BenchRow.lowerIsBetter(
                    name,
                    percentile(a, p) / 1e6,
                    "ms",
                    reference + "_p" + Math.round(p * 100),
                    percentile(b, p) / 1e6));
        }
    }

    static long[] pooled(List<long[]> runs) {
        long[] all = runs.stream().flatMapToLong(Arrays::stream).toArray();
        Arrays.sort(all);
        return all;
    }

    static double percentile(long[] sorted, double p) {
        return sorted[Math.min(sorted.length - 1, Math.max(0, (int) Math.ceil(p * sorted.length) - 1))];
    }

    static double median(List<Double> values) {
        return median(values.stream().mapToDouble(Double::doubleValue).toArray());
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
