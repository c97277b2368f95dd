package io.hicache.bench;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * {@code python}: the Python client ({@code clients/python}) against the daemon, beside the Java {@code remote}
 * client in the same run. One daemon in a child JVM (no L3, slab in /dev/shm); batches of 128 pages of 64 KiB and
 * 1 MiB; gets of pages stored once, puts under fresh keys. Rows: the Python client over TCP against the Java client
 * over TCP (aim at least 0.7), and the Python client's same-host path (leases for gets, RESERVE / COMMIT for puts)
 * against its own TCP path (aim at least 2). Rounds alternate subject and reference ({@link Comparison}); the Python
 * side is a worker process ({@code clients/python/interop/bench_worker.py}) driven over a pipe, one line per batch,
 * whose cost (well under a millisecond against batches of 8 and 128 MiB) is counted against Python. Before them,
 * SGLang's backup and prefetch path: the SGLang backend's {@code batch_set_v1} / {@code batch_get_v1} of 16 pages of
 * 8 MiB from an SGLang-like host pool, against one thread's memcpy of the same pages (same host) and the Java client
 * (TCP). Stateless.
 */
public final class PythonSuite implements BenchSuite {
    private static final int PAGES = 128;
    /** The Python client over TCP against the Java client: at least this ratio. */
    private static final double TCP_AIM = 0.7;
    /** The Python client's same-host path against its own TCP path: at least this ratio. */
    private static final double SAME_HOST_AIM = 2;

    private static final int[] PAGE_BYTES = {64 * 1024, 1024 * 1024};
    /** SGLang's backup path: pages of a 70B-class model's rank (8 MiB), 16 to a batch. */
    private static final int SGLANG_PAGE_BYTES = 8 << 20;

    private static final int SGLANG_PAGES = 16;
    /** The SGLang backend on the daemon's host against one thread's memcpy of the same pages: at least this. */
    private static final double SGLANG_SAME_HOST_AIM = 0.5;
    /** The SGLang backend over TCP against the Java client on pages of the same size: at least this. */
    private static final double SGLANG_TCP_AIM = 0.8;

    private static final Namespace NAMESPACE =
            Namespace.of("bench/python", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    @Override
    public String name() {
        return "python";
    }

    @Override
    public String description() {
        return "Python client vs the Java remote client (TCP), and its same-host path vs its TCP path: get/put of "
                + "128-page batches (64 KiB, 1 MiB); SGLang's batch_set_v1/get_v1 of 8 MiB pages vs memcpy and the "
                + "Java client";
    }

    @Override
    public List<BenchRow> run(boolean quick) throws Exception {
        Path client = clientFolder();
        Comparison comparison = Comparison.forRun(quick, 3, 8, 500);
        List<BenchRow> rows = new ArrayList<>();
        try (ServerProcess daemon = ServerProcess.hicache(3L << 30);
                PythonWorker python = new PythonWorker(client);
                RemotePageStore java = RemotePageStore.open(RemoteStoreConfig.local(daemon.port, ""));
                Arena arena = Arena.ofShared()) {
            python.call("open " + daemon.port);
            rows.addAll(sglangBackupPath(python, java, daemon, comparison, arena));
            for (int pageBytes : PAGE_BYTES) {
                String size = pageBytes == 1 << 20 ? "1m" : "64k";
                List<StoreKey> stored = keys(NAMESPACE, python.call("fill " + pageBytes + " " + PAGES));
                List<MemorySegment> pages = pages(arena, pageBytes, PAGES);
                Comparison.Workload javaGet =
                        () -> javaCall(java.get(PageBatch.of(stored, pages), deadline()), pageBytes);
                Comparison.Workload javaPut = () ->
                        javaCall(java.put(PageBatch.of(freshKeys(NAMESPACE, PAGES), pages), deadline()), pageBytes);
                Comparison.Workload tcpGet = () -> Long.parseLong(python.call("get tcp " + pageBytes));
                Comparison.Workload tcpPut = () -> Long.parseLong(python.call("put tcp " + pageBytes));
                Comparison.Workload localGet = () -> Long.parseLong(python.call("get local " + pageBytes));
                Comparison.Workload localPut = () -> Long.parseLong(python.call("put local " + pageBytes));
                // Gets first: the puts that follow fill the slab, whose eviction (no L3: dropping) would take the
                // pages stored for the gets.
                rows.add(gbps(
                        "python_tcp_get_" + size, "java_remote_get", comparison.measure(tcpGet, javaGet), TCP_AIM));
                rows.add(gbps(
                        "python_local_get_" + size,
                        "python_tcp_get",
                        comparison.measure(localGet, tcpGet),
                        SAME_HOST_AIM));
                rows.add(gbps(
                        "python_tcp_put_" + size, "java_remote_put", comparison.measure(tcpPut, javaPut), TCP_AIM));
                rows.add(gbps(
                        "python_local_put_" + size,
                        "python_tcp_put",
                        comparison.measure(localPut, tcpPut),
                        SAME_HOST_AIM));
            }
        }
        return rows;
    }

    /**
     * SGLang's backup and prefetch path (issue 38): {@code HiCacheDaemonStorage.batch_set_v1} / {@code batch_get_v1}
     * of 16 pages of 8 MiB from an SGLang-like host pool, on the daemon's host against one thread's memcpy of the
     * same pages from the same pool (aim 0.5), and over TCP against the Java client on pages of the same size (aim
     * 0.8). Gets first, as below.
     */
    private static List<BenchRow> sglangBackupPath(
            PythonWorker python, RemotePageStore java, ServerProcess daemon, Comparison comparison, Arena arena)
            throws Exception {
        int pageBytes = SGLANG_PAGE_BYTES;
        Namespace ns = Namespace.of("bench/sglang", KvDtype.BFLOAT16, PageByteOrder.TOKEN_MAJOR, 0, 1);
        List<StoreKey> stored = keys(ns, python.call("sglang " + daemon.port + " " + pageBytes + " " + SGLANG_PAGES));
        List<MemorySegment> pages = pages(arena, pageBytes, SGLANG_PAGES);
        Comparison.Workload memcpy = () -> Long.parseLong(python.call("memcpy"));
        Comparison.Workload javaGet = () -> javaCall(java.get(PageBatch.of(stored, pages), deadline()), pageBytes);
        Comparison.Workload javaPut =
                () -> javaCall(java.put(PageBatch.of(freshKeys(ns, SGLANG_PAGES), pages), deadline()), pageBytes);
        Comparison.Workload localGet = () -> Long.parseLong(python.call("sglang_get local"));
        Comparison.Workload tcpGet = () -> Long.parseLong(python.call("sglang_get tcp"));
        Comparison.Workload localSet = () -> Long.parseLong(python.call("sglang_set local"));
        Comparison.Workload tcpSet = () -> Long.parseLong(python.call("sglang_set tcp"));
        return List.of(
                gbps(
                        "python_sglang_get_v1_8m",
                        "python_memcpy",
                        comparison.measure(localGet, memcpy),
                        SGLANG_SAME_HOST_AIM),
                gbps(
                        "python_sglang_tcp_get_v1_8m",
                        "java_remote_get",
                        comparison.measure(tcpGet, javaGet),
                        SGLANG_TCP_AIM),
                gbps(
                        "python_sglang_set_v1_8m",
                        "python_memcpy",
                        comparison.measure(localSet, memcpy),
                        SGLANG_SAME_HOST_AIM),
                gbps(
                        "python_sglang_tcp_set_v1_8m",
                        "java_remote_put",
                        comparison.measure(tcpSet, javaPut),
                        SGLANG_TCP_AIM));
    }

    /** A row in GB/s, higher better, with its aim. */
    private static BenchRow gbps(String metric, String reference, Comparison.Result result, double aim) {
        return BenchRow.higherIsBetter(metric, "GB/s", reference, result, 1e-9).withAim(aim);
    }

    /** The keys of the worker's answer {@code ok HEX,HEX,...} in {@code ns}. */
    private static List<StoreKey> keys(Namespace ns, String answer) {
        List<StoreKey> keys = new ArrayList<>();
        for (String hex : answer.substring(3).split(",")) {
            keys.add(ns.key(PageHash.fromHex(hex)));
        }
        return keys;
    }

    /** {@code count} pages of {@code pageBytes}, page {@code i} filled with byte {@code i}. */
    private static List<MemorySegment> pages(Arena arena, int pageBytes, int count) {
        List<MemorySegment> pages = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            MemorySegment page = arena.allocate(pageBytes, 4096);
            page.fill((byte) i);
            pages.add(page);
        }
        return pages;
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(60));
    }

    /** {@code count} keys of random hashes in {@code ns}. */
    private static List<StoreKey> freshKeys(Namespace ns, int count) {
        List<StoreKey> keys = new ArrayList<>(count);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < count; i++) {
            ThreadLocalRandom.current().nextBytes(hash);
            keys.add(ns.key(PageHash.fromBytes(hash, 0)));
        }
        return keys;
    }

    /** Bytes a Java batch moved; every page must be OK. */
    private static long javaCall(CompletableFuture<BatchResult> call, int pageBytes) throws Exception {
        BatchResult r = call.get(60, TimeUnit.SECONDS);
        if (r.count(PageStatus.OK) != r.size()) {
            throw new IllegalStateException(
                    "the Java client's batch was not all OK: " + r.count(PageStatus.OK) + " of " + r.size());
        }
        return (long) r.size() * pageBytes;
    }

    /** {@code clients/python} of this checkout: found from the working folder up. */
    private static Path clientFolder() {
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("clients/python/interop/bench_worker.py");
            if (Files.isRegularFile(candidate)) {
                return dir.resolve("clients/python");
            }
        }
        throw new IllegalStateException("clients/python not found above "
                + Path.of("").toAbsolutePath() + ": run the python suite from the checkout");
    }

    /** The worker process: one command line in, one answer line out. Not thread-safe. */
    private static final class PythonWorker implements AutoCloseable {
        private final Process process;
        private final Writer in;
        private final BufferedReader out;

        PythonWorker(Path client) throws IOException {
            ProcessBuilder b = new ProcessBuilder("python3", "interop/bench_worker.py")
                    .directory(client.toFile())
                    .redirectError(ProcessBuilder.Redirect.INHERIT);
            b.environment().put("PYTHONPATH", client.toString());
            process = b.start();
            in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        }

        String call(String command) throws IOException {
            in.write(command + "\n");
            in.flush();
            String answer = out.readLine();
            if (answer == null || answer.startsWith("error")) {
                throw new IllegalStateException("the Python worker, asked '" + command + "', answered: " + answer);
            }
            return answer;
        }

        @Override
        public void close() throws IOException {
            try {
                in.write("quit\n");
                in.flush();
            } catch (IOException gone) {
                // it died already
            }
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
