package io.hicache.bench.server;

import io.hicache.bench.BenchRow;
import io.hicache.bench.Progress;
import io.hicache.bench.ServerProcess;
import io.hicache.core.store.PageChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The daemon's Redis protocol (docs/resp.md) against Redis 7 in the same run (issue 41, part 3): the suite's own
 * generator speaking RESP to both at 4 MiB values ({@code resp_vs_redis_set_4m}, {@code resp_vs_redis_get_4m}), and
 * {@code redis-benchmark} (Redis's own tool) against both at 64 KiB and 1 MiB with pipelining and threads
 * ({@code resp_benchmark_*}). Rounds alternate which server goes first; medians.
 */
final class RespRows {
    private static final int VALUE_BYTES = 4 << 20;
    private static final long ROUND_BYTES = 512L << 20;

    private RespRows() {}

    /** {@code -Dhicache.bench.server.respOnly=true}: run only these rows. */
    static boolean only() {
        return Boolean.getBoolean("hicache.bench.server.respOnly");
    }

    static void run(boolean quick, List<BenchRow> rows) throws Exception {
        try (ServerProcess redis = ServerProcess.redis();
                ServerProcess daemon = ServerProcess.hicache(2 * ROUND_BYTES, List.of("--server.resp-port", "0"));
                LoadGenerator toRedis = LoadGenerator.connect(
                        new RespProtocol(), redis.port, ServerSuite.CONNECTIONS, ServerSuite.DEPTH);
                LoadGenerator toDaemon = LoadGenerator.connect(
                        new RespProtocol(), daemon.respPort, ServerSuite.CONNECTIONS, ServerSuite.DEPTH)) {
            generator(quick, daemon, redis, toDaemon, toRedis, rows);
            for (int size : new int[] {64 << 10, 1 << 20}) {
                redisBenchmark(quick, daemon.respPort, redis, size, rows);
            }
        }
    }

    private static void generator(
            boolean quick,
            ServerProcess daemon,
            ServerProcess redis,
            LoadGenerator toDaemon,
            LoadGenerator toRedis,
            List<BenchRow> rows)
            throws Exception {
        int pages = (int) ((quick ? ROUND_BYTES / 16 : ROUND_BYTES) / VALUE_BYTES);
        int warmup = quick ? 1 : 6;
        int rounds = quick ? 1 : 6;
        ByteBuf body = Unpooled.directBuffer(VALUE_BYTES);
        SplittableRandom random = new SplittableRandom(41);
        while (body.isWritable(8)) {
            body.writeLong(random.nextLong());
        }
        int crc = PageChecksum.of(MemorySegment.ofBuffer(body.nioBuffer()));
        RespProtocol protocol = new RespProtocol();
        List<List<Double>> set = newLists();
        List<List<Double>> get = newLists();
        try {
            PageCheck.verify("hicache (RESP)", daemon.respPort, toDaemon, protocol, body, crc);
            PageCheck.verify(redis.name, redis.port, toRedis, protocol, body, crc);
            LoadGenerator[] sides = {toDaemon, toRedis};
            for (int r = 0; r < warmup + rounds; r++) {
                long round = ((long) VALUE_BYTES << 16) | r;
                int[] order = new SplittableRandom(round).ints(pages, 0, pages).toArray();
                for (int i = 0; i < 2; i++) {
                    int side = (i + r) % 2;
                    LoadGenerator load = sides[side];
                    LoadGenerator.Phase s = load.run(
                            pages,
                            (alloc, id, index) -> protocol.set(
                                    alloc, id, LoadProtocol.PageKey.of(round, index), body.retainedDuplicate(), crc));
                    LoadGenerator.Phase g = load.run(pages, (alloc, id, index) -> new ByteBuf[] {
                        protocol.get(alloc, id, LoadProtocol.PageKey.of(round, order[index]), VALUE_BYTES)
                    });
                    load.run(1, (alloc, id, index) -> new ByteBuf[] {protocol.flushAll(alloc, id)});
                    if (r >= warmup) {
                        set.get(side).add((double) pages * VALUE_BYTES / s.nanos());
                        get.get(side).add((double) pages * VALUE_BYTES / g.nanos());
                    }
                }
                Progress.roundDone(r + 1, warmup + rounds);
            }
        } finally {
            body.release();
        }
        String reference = "redis_" + redis.version;
        rows.add(row("resp_vs_redis_set_4m", set.get(0), set.get(1), reference));
        rows.add(row("resp_vs_redis_get_4m", get.get(0), get.get(1), reference));
    }

    /** Figures of the daemon (0) and of Redis (1). */
    private static List<List<Double>> newLists() {
        return List.of(new ArrayList<>(), new ArrayList<>());
    }

    private static BenchRow row(String metric, List<Double> mine, List<Double> theirs, String reference) {
        double[] ratios = new double[mine.size()];
        for (int i = 0; i < ratios.length; i++) {
            ratios[i] = mine.get(i) / theirs.get(i);
        }
        return new BenchRow(metric, median(mine), "GB/s", reference, median(theirs), median(ratios), "higher")
                .withAim(1.0);
    }

    private static double median(List<Double> xs) {
        double[] a = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        return a.length == 0 ? Double.NaN : a[a.length / 2];
    }

    private static double median(double[] xs) {
        double[] a = xs.clone();
        Arrays.sort(a);
        return a.length == 0 ? Double.NaN : a[a.length / 2];
    }

    /**
     * {@code redis-benchmark -t set,get -d SIZE -P 8 -c 16 --threads 2 -r REQUESTS/4 --csv} against both servers,
     * alternating, three runs each; GB/s from its requests per second.
     */
    private static void redisBenchmark(boolean quick, int respPort, ServerProcess redis, int size, List<BenchRow> rows)
            throws IOException, InterruptedException {
        int requests = (int) Math.max(200, (quick ? 64L << 20 : 1L << 30) / size);
        int runs = quick ? 1 : 3;
        List<List<Double>> set = newLists();
        List<List<Double>> get = newLists();
        int[] ports = {respPort, redis.port};
        for (int run = 0; run < runs; run++) {
            for (int i = 0; i < 2; i++) {
                int side = (i + run) % 2;
                double[] rps = redisBenchmark(ports[side], size, requests);
                set.get(side).add(rps[0] * size / 1e9);
                get.get(side).add(rps[1] * size / 1e9);
            }
        }
        String name = size >= (1 << 20) ? (size >> 20) + "m" : (size >> 10) + "k";
        String reference = "redis_" + redis.version + "_by_redis_benchmark";
        rows.add(row("resp_benchmark_set_" + name, set.get(0), set.get(1), reference));
        rows.add(row("resp_benchmark_get_" + name, get.get(0), get.get(1), reference));
    }

    /** One redis-benchmark run: SET and GET requests per second. */
    private static double[] redisBenchmark(int port, int size, int requests) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(
                        "redis-benchmark",
                        "-h",
                        "127.0.0.1",
                        "-p",
                        Integer.toString(port),
                        "-t",
                        "set,get",
                        "-n",
                        Integer.toString(requests),
                        "-d",
                        Integer.toString(size),
                        "-P",
                        "8",
                        "-c",
                        "16",
                        "--threads",
                        "2",
                        // A keyspace a quarter of the requests: the SETs fill nearly all of it (1 - e^-4 = 98%), so
                        // the GETs that follow find values rather than answering nil.
                        "-r",
                        Integer.toString(Math.max(1, requests / 4)),
                        "--csv")
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("redis-benchmark failed: " + out);
        }
        double[] rps = {Double.NaN, Double.NaN};
        for (String line : out.split("\n")) {
            String[] cells = line.replace("\"", "").split(",");
            if (cells.length >= 2 && (cells[0].equals("SET") || cells[0].equals("GET"))) {
                rps[cells[0].equals("SET") ? 0 : 1] = Double.parseDouble(cells[1]);
            }
        }
        if (Double.isNaN(rps[0]) || Double.isNaN(rps[1])) {
            throw new IOException("redis-benchmark printed no SET and GET rates: " + out);
        }
        return rps;
    }
}
