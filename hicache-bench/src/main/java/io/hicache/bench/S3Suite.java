package io.hicache.bench;

import com.sun.management.OperatingSystemMXBean;
import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.s3.S3PageStore;
import io.hicache.storage.s3.client.S3Config;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.gaul.s3proxy.BlobStores;
import org.gaul.s3proxy.S3Proxy;
import org.gaul.s3proxy.auth.AuthenticationType;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.ResponseBytes;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/**
 * {@code s3}: the S3 store against S3Proxy (objects in memory) on 127.0.0.1 in this JVM. Batches of 128 pages of
 * 256 KiB and 1 MiB, get and put, against the same SDK used as a naive user would: a synchronous client, one request
 * at a time, bodies copied through a {@code byte[]}; in alternating rounds. Then the latency of single-page requests,
 * median and 99th percentile, the store against the same naive client. Server and client share this machine's
 * cores, so gets also report the process's CPU seconds per GB moved. Gets are checked against the bytes put.
 *
 * <p>Then the same batches again through a {@link LatencyProxy} in front of the server, which gives each response a
 * first-byte delay and each connection a throughput cap (20 ms and 100 MB/s unless the system properties
 * {@value LatencyProxy.Settings#FIRST_BYTE_MS_PROPERTY} and {@value LatencyProxy.Settings#MB_PER_SECOND_PROPERTY}
 * say otherwise): the {@code s3_latency_*} rows, where what counts is how many requests the store keeps in flight.
 * The naive loop goes through the same proxy. Stateless; the servers and the objects go when the suite ends.
 */
public final class S3Suite implements BenchSuite {
    static final int BATCH = 128;
    static final int[] PAGE_BYTES = {256 * 1024, 1024 * 1024};
    private static final String BUCKET = "hicache-bench";
    private static final String ACCESS_KEY = "bench";
    private static final String SECRET_KEY = "bench-secret";
    /** What the 1 MiB latency rows aim at: 20 requests' worth in flight against the naive loop's one. */
    private static final double LATENCY_AIM = 20;

    @Override
    public String name() {
        return "s3";
    }

    @Override
    public String description() {
        return "S3 store on S3Proxy over loopback: batched get/put of 128 pages (256 KiB, 1 MiB) vs a naive SDK loop; "
                + "single-page latency; the batches again through a proxy adding S3-like latency and a per-connection cap";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        Logger.getLogger("org.gaul").setLevel(Level.WARNING);
        S3Proxy proxy = startServer();
        URI endpoint = URI.create("http://127.0.0.1:" + proxy.getPort());
        List<BenchRow> rows = new ArrayList<>();
        try (S3Client naive = naiveClient(endpoint)) {
            naive.createBucket(b -> b.bucket(BUCKET));
            try (S3PageStore store = S3PageStore.open(S3Config.local(endpoint, BUCKET, ACCESS_KEY, SECRET_KEY));
                    Arena arena = Arena.ofShared()) {
                Comparison comparison = Comparison.forRun(quick, 1, 6, 300);
                for (int pageBytes : PAGE_BYTES) {
                    batches(store, naive, pageBytes, comparison, arena, rows, op -> "s3_" + op + "_128_pages_", true);
                }
                latency(store, naive, quick ? 20 : 400, arena, rows);
            }
            throughLatencyProxy(proxy.getPort(), quick, rows);
        } finally {
            proxy.stop();
        }
        return rows;
    }

    /**
     * The batches through a {@link LatencyProxy}, store and naive loop alike: a naive run of 128 pages takes seconds
     * there (128 times the first-byte delay and the transfer at the capped rate), so these rows have fewer rounds and
     * the naive loop no warm-up of its own.
     */
    private static void throughLatencyProxy(int serverPort, boolean quick, List<BenchRow> rows) throws Exception {
        LatencyProxy.Settings settings = LatencyProxy.Settings.fromSystemProperties();
        try (LatencyProxy slow = new LatencyProxy(serverPort, settings);
                S3Client naive = naiveClient(slow.endpoint());
                S3PageStore store = S3PageStore.open(S3Config.local(slow.endpoint(), BUCKET, ACCESS_KEY, SECRET_KEY));
                Arena arena = Arena.ofShared()) {
            Comparison comparison = Comparison.forRun(quick, 1, 3, 300).withoutReferenceWarmup();
            for (int pageBytes : PAGE_BYTES) {
                batches(store, naive, pageBytes, comparison, arena, rows, op -> "s3_latency_" + op + "_", false);
            }
        }
    }

    private static S3Client naiveClient(URI endpoint) {
        return S3Client.builder()
                .region(Region.US_EAST_1)
                .endpointOverride(endpoint)
                .forcePathStyle(true)
                .credentialsProvider(
                        StaticCredentialsProvider.create(AwsBasicCredentials.create(ACCESS_KEY, SECRET_KEY)))
                .build();
    }

    private static S3Proxy startServer() throws Exception {
        Properties p = new Properties();
        p.setProperty("jclouds.identity", ACCESS_KEY);
        p.setProperty("jclouds.credential", SECRET_KEY);
        S3Proxy proxy = S3Proxy.builder()
                .blobStore(BlobStores.create("transient", p))
                .endpoint(URI.create("http://127.0.0.1:0"))
                .awsAuthentication(AuthenticationType.AWS_V2_OR_V4, ACCESS_KEY, SECRET_KEY)
                .ignoreUnknownHeaders(true)
                .stopTimeout(0)
                .build();
        proxy.start();
        while (!"STARTED".equals(proxy.getState())) {
            Thread.sleep(5);
        }
        return proxy;
    }

    /**
     * Batched put and get of 128 pages against the naive loop, rows named {@code metric.apply(op) + size}; with
     * {@code cpu}, also the CPU each way of getting costs. The latency rows (no CPU row) aim at 20 for 1 MiB pages.
     */
    private static void batches(
            S3PageStore store,
            S3Client naive,
            int pageBytes,
            Comparison comparison,
            Arena arena,
            List<BenchRow> rows,
            Function<String, String> metric,
            boolean cpu)
            throws Exception {
        Namespace ns = Namespace.of("bench/s3/" + pageBytes, KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        List<StoreKey> keys = keys(ns, BATCH);
        List<MemorySegment> sources = pages(arena, BATCH, pageBytes, true);
        List<MemorySegment> targets = pages(arena, BATCH, pageBytes, false);
        long batchBytes = (long) BATCH * pageBytes;
        String size = pageBytes >= (1 << 20) ? (pageBytes >> 20) + "m" : (pageBytes >> 10) + "k";
        // The same keys every round: puts overwrite, so the server's memory holds one batch per side.
        Comparison.Workload put = () -> {
            require(store.put(PageBatch.of(keys, sources), deadline()).get(5, TimeUnit.MINUTES), "put");
            return batchBytes;
        };
        Comparison.Workload naivePut = () -> {
            for (int i = 0; i < BATCH; i++) {
                byte[] body = sources.get(i).toArray(ValueLayout.JAVA_BYTE);
                String key = "naive/" + store.objectKey(keys.get(i));
                naive.putObject(b -> b.bucket(BUCKET).key(key), RequestBody.fromBytes(body));
            }
            return batchBytes;
        };
        boolean aimed = !cpu && pageBytes == (1 << 20);
        BenchRow putRow = BenchRow.higherIsBetter(
                metric.apply("put") + size,
                "GB/s",
                "naive_sdk_loop_via_byte_array",
                comparison.measure(put, naivePut),
                1e-9);
        rows.add(aimed ? putRow.withAim(LATENCY_AIM) : putRow);
        Comparison.Workload get = () -> {
            require(store.get(PageBatch.of(keys, targets), deadline()).get(5, TimeUnit.MINUTES), "get");
            return batchBytes;
        };
        Comparison.Workload naiveGet = () -> {
            for (int i = 0; i < BATCH; i++) {
                String key = "naive/" + store.objectKey(keys.get(i));
                ResponseBytes<GetObjectResponse> body =
                        naive.getObjectAsBytes(b -> b.bucket(BUCKET).key(key));
                MemorySegment.copy(body.asByteArray(), 0, targets.get(i), ValueLayout.JAVA_BYTE, 0, pageBytes);
            }
            return batchBytes;
        };
        BenchRow getRow = BenchRow.higherIsBetter(
                metric.apply("get") + size,
                "GB/s",
                "naive_sdk_loop_via_byte_array",
                comparison.measure(get, naiveGet),
                1e-9);
        rows.add(aimed ? getRow.withAim(LATENCY_AIM) : getRow);
        if (cpu) {
            // Client and server share this machine's cores: what each way costs in CPU says more than speed alone.
            rows.add(BenchRow.lowerIsBetter(
                    "s3_get_128_pages_" + size + "_cpu_seconds_per_gb",
                    cpuSecondsPerGb(get, batchBytes),
                    "cpu-s/GB",
                    "naive_sdk_loop_cpu_seconds_per_gb",
                    cpuSecondsPerGb(naiveGet, batchBytes)));
        }
        require(store.get(PageBatch.of(keys, targets), deadline()).get(5, TimeUnit.MINUTES), "get");
        for (int i = 0; i < BATCH; i++) {
            if (MemorySegment.mismatch(sources.get(i), 0, pageBytes, targets.get(i), 0, pageBytes) >= 0) {
                throw new IllegalStateException("the S3 store returned wrong bytes for page " + i);
            }
        }
    }

    /** Process CPU time (this JVM: client and server) per GB moved, over a few runs of {@code work}. */
    private static double cpuSecondsPerGb(Comparison.Workload work, long bytesPerRun) throws Exception {
        var os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        int runs = 4;
        long before = os.getProcessCpuTime();
        for (int i = 0; i < runs; i++) {
            work.run();
        }
        return (os.getProcessCpuTime() - before) / 1e9 / (runs * bytesPerRun / 1e9);
    }

    /** Single-page requests one after another, store and naive client alternating: median and 99th percentile. */
    private static void latency(S3PageStore store, S3Client naive, int requests, Arena arena, List<BenchRow> rows)
            throws Exception {
        int pageBytes = 256 * 1024;
        Namespace ns = Namespace.of("bench/s3/latency", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        StoreKey key = keys(ns, 1).getFirst();
        MemorySegment source = pages(arena, 1, pageBytes, true).getFirst();
        MemorySegment target = pages(arena, 1, pageBytes, false).getFirst();
        String naiveKey = "naive/" + store.objectKey(key);
        double[][] ms = new double[4][requests];
        for (int r = -requests / 10; r < requests; r++) {
            long a = System.nanoTime();
            require(
                    store.put(PageBatch.of(List.of(key), List.of(source)), deadline())
                            .get(1, TimeUnit.MINUTES),
                    "put");
            long b = System.nanoTime();
            byte[] body = source.toArray(ValueLayout.JAVA_BYTE);
            naive.putObject(x -> x.bucket(BUCKET).key(naiveKey), RequestBody.fromBytes(body));
            long c = System.nanoTime();
            require(
                    store.get(PageBatch.of(List.of(key), List.of(target)), deadline())
                            .get(1, TimeUnit.MINUTES),
                    "get");
            long d = System.nanoTime();
            MemorySegment.copy(
                    naive.getObjectAsBytes(x -> x.bucket(BUCKET).key(naiveKey)).asByteArray(),
                    0,
                    target,
                    ValueLayout.JAVA_BYTE,
                    0,
                    pageBytes);
            long e = System.nanoTime();
            if (r >= 0) {
                ms[0][r] = (b - a) / 1e6;
                ms[1][r] = (c - b) / 1e6;
                ms[2][r] = (d - c) / 1e6;
                ms[3][r] = (e - d) / 1e6;
            }
        }
        String[] what = {"put", "get"};
        for (int op = 0; op < 2; op++) {
            double[] mine = ms[2 * op].clone();
            double[] theirs = ms[2 * op + 1].clone();
            Arrays.sort(mine);
            Arrays.sort(theirs);
            rows.add(BenchRow.lowerIsBetter(
                    "s3_" + what[op] + "_one_256k_page_p50",
                    percentile(mine, 0.5),
                    "ms",
                    "naive_sdk_p50",
                    percentile(theirs, 0.5)));
            rows.add(BenchRow.lowerIsBetter(
                    "s3_" + what[op] + "_one_256k_page_p99",
                    percentile(mine, 0.99),
                    "ms",
                    "naive_sdk_p99",
                    percentile(theirs, 0.99)));
        }
    }

    private static double percentile(double[] sorted, double p) {
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p * sorted.length) - 1)];
    }

    private static List<StoreKey> keys(Namespace ns, int count) {
        List<StoreKey> keys = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            keys.add(ns.key(PageHash.fromHex(String.format("%016x", i) + "0".repeat(47) + "1")));
        }
        return keys;
    }

    private static List<MemorySegment> pages(Arena arena, int count, int bytes, boolean fill) {
        SplittableRandom random = new SplittableRandom(bytes);
        List<MemorySegment> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            MemorySegment page = arena.allocate(bytes, 4096);
            if (fill) {
                for (long off = 0; off < bytes; off += 8) {
                    page.set(ValueLayout.JAVA_LONG_UNALIGNED, off, random.nextLong());
                }
            }
            out.add(page);
        }
        return out;
    }

    private static void require(BatchResult r, String what) {
        if (r.count(PageStatus.OK) + r.count(PageStatus.EXISTS) != r.size()) {
            throw new IllegalStateException(what + " failed: " + r);
        }
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofMinutes(2));
    }
}
