package io.hicache.bench;

import io.hicache.testkit.ChildJvm;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.kit.TransferPeerMain;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The UCX transport's rows of the {@code transfer} suite: one-sided writes of 1 MiB and 64 KiB and reads of 1 MiB into
 * a peer JVM, against UCX's own benchmark, {@code ucx_perftest} ({@code ucp_put_bw}, {@code ucp_get}) between two
 * processes with the same UCX transports ({@code UCX_TLS}), the same peer-failure handling ({@code -e}, which the
 * transport always asks for), the same message size, in alternating rounds (perftest with its buffers in ordinary
 * memory, as ours are, and with the memory UCX allocates: see {@link #vsPerftest}); and the UCX transport against the
 * TCP transport on the same messages. Both sides of each comparison write one message-sized buffer again and again into
 * one message-sized remote buffer, as {@code ucx_perftest} does.
 *
 * <p>Stateless; every engine, child JVM and perftest process is closed before it returns. Skipped (no rows) where
 * UCX cannot run.
 */
final class UcxRows {
    /** What the rows run on: UCX's shared-memory transports, as a same-host peer gets by default. */
    static final String TLS = "sm";

    private static final Pattern FINAL =
            Pattern.compile("Final:\\s+(\\d+)\\s+(\\S+)\\s+(\\S+)\\s+(\\S+)\\s+(\\S+)\\s+(\\S+)");

    private UcxRows() {}

    static List<BenchRow> run(boolean quick) throws Exception {
        if (TransferEngine.unavailable("ucx").isPresent()) {
            System.err.println("transfer: ucx rows skipped: "
                    + TransferEngine.unavailable("ucx").orElseThrow());
            return List.of();
        }
        Path perftest = DebianTools.find("ucx_perftest", "ucx-utils");
        int rounds = quick ? 2 : 5;
        List<BenchRow> rows = new ArrayList<>();
        rows.addAll(vsPerftest(perftest, "ucx_put_1m", true, 1 << 20, rounds));
        rows.addAll(vsPerftest(perftest, "ucx_put_64k", true, 64 << 10, rounds));
        rows.addAll(vsPerftest(perftest, "ucx_get_1m", false, 1 << 20, rounds));
        rows.add(vsTcp("ucx_vs_tcp_put_1m", true, 1 << 20, rounds));
        rows.add(vsTcp("ucx_vs_tcp_get_1m", false, 1 << 20, rounds));
        return rows;
    }

    private static Map<String, String> options() {
        return Map.of("ucx.tls", TLS);
    }

    /**
     * An engine in a child JVM serving a shared region {@code peer} of {@code bytes} from a folder of its own under
     * /dev/shm; closed by SIGTERM, after which the folder (and the region file the child could not delete) goes.
     */
    private static final class Peer implements AutoCloseable {
        final ChildJvm child;
        final String address;
        final Path shmDir;

        Peer(String transport, TransferConfig config, long bytes) throws Exception {
            shmDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-bench-ucx");
            child = ChildJvm.start(
                    TransferPeerMain.class,
                    List.of(transport, shmDir.toString(), Long.toString(bytes), "5", TransferPeerMain.options(config)));
            if (!child.awaitLine("ready ", 60, TimeUnit.SECONDS)) {
                child.kill();
                throw new IOException("the transfer peer did not start");
            }
            address = child.lines().stream()
                    .filter(l -> l.startsWith("ready "))
                    .findFirst()
                    .orElseThrow()
                    .substring(6);
        }

        @Override
        public void close() throws IOException {
            try {
                child.terminate(Duration.ofSeconds(20));
            } catch (IOException | RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IOException("the transfer peer did not stop", e);
            } finally {
                try (var files = Files.list(shmDir)) {
                    for (Path f : files.toList()) {
                        Files.deleteIfExists(f);
                    }
                }
                Files.deleteIfExists(shmDir);
            }
        }
    }

    /** The sender side over {@code transport}: repeats a batch of one-message requests; bytes per second. */
    private static final class Sender implements AutoCloseable {
        final TransferEngine engine;
        final Peer peer;
        final RemoteSegment segment;
        final List<TransferRequest> batch = new ArrayList<>();
        final long batchBytes;
        final Arena arena = Arena.ofShared();

        Sender(String transport, Map<String, String> options, boolean write, int messageBytes) throws Exception {
            TransferConfig config =
                    TransferConfig.defaults("bench-" + transport).withTransports(List.of(transport));
            for (Map.Entry<String, String> o : options.entrySet()) {
                config = config.withTransportOption(o.getKey(), o.getValue());
            }
            engine = TransferEngine.open(config);
            peer = new Peer(transport, config, messageBytes);
            LocalRegion local = engine.register("local", arena.allocate(messageBytes, 4096));
            local.memory().fill((byte) 3);
            segment = engine.openSegment(peer.address, Duration.ofSeconds(10));
            int count = Math.max(16, (int) ((64L << 20) / messageBytes));
            for (int i = 0; i < count; i++) {
                batch.add(
                        write
                                ? TransferRequest.write(local.memory(), "peer", 0)
                                : TransferRequest.read(local.memory(), "peer", 0));
            }
            batchBytes = (long) count * messageBytes;
            runFor(0.3); // warm-up: endpoints, keys, JIT
        }

        double runFor(double seconds) throws Exception {
            return TransferSuite.repeatFor(engine, segment, batch, batchBytes, seconds);
        }

        @Override
        public void close() throws IOException {
            try {
                segment.close();
                engine.close();
            } finally {
                peer.close();
                arena.close();
            }
        }
    }

    /**
     * Our transport against {@code ucx_perftest} in alternating rounds, perftest twice per round: with its buffers in
     * ordinary memory ({@code UCX_ALLOC_PRIO=heap}), as the engine's regions are, which UCX moves by the same protocol as
     * ours (the row with the aim); and with the buffers UCX allocates itself by default (shared-memory segments that a
     * same-host peer maps and copies into directly: a path UCX 1.13 offers only for its own allocations).
     */
    private static List<BenchRow> vsPerftest(Path perftest, String metric, boolean write, int messageBytes, int rounds)
            throws Exception {
        String test = write ? "ucp_put_bw" : "ucp_get";
        double[] ours = new double[rounds];
        double[] plain = new double[rounds];
        double[] ucxMemory = new double[rounds];
        try (Sender sender = new Sender("ucx", options(), write, messageBytes)) {
            long plainIterations = perftestIterations(perftest, test, messageBytes, true);
            long ucxIterations = perftestIterations(perftest, test, messageBytes, false);
            for (int r = 0; r < rounds; r++) {
                if (r % 2 == 0) {
                    ours[r] = sender.runFor(1);
                    plain[r] = perftest(perftest, test, messageBytes, plainIterations, true);
                    ucxMemory[r] = perftest(perftest, test, messageBytes, ucxIterations, false);
                } else {
                    ucxMemory[r] = perftest(perftest, test, messageBytes, ucxIterations, false);
                    plain[r] = perftest(perftest, test, messageBytes, plainIterations, true);
                    ours[r] = sender.runFor(1);
                }
                Progress.roundDone(r + 1, rounds);
            }
        }
        String reference = "ucx_perftest_" + test + "_" + size(messageBytes);
        return List.of(
                row(metric, ours, plain, reference).withAim(0.9),
                row(metric + "_vs_ucx_memory", ours, ucxMemory, reference + "_ucx_alloc"));
    }

    private static BenchRow vsTcp(String metric, boolean write, int messageBytes, int rounds) throws Exception {
        double[] ours = new double[rounds];
        double[] theirs = new double[rounds];
        try (Sender ucx = new Sender("ucx", options(), write, messageBytes);
                Sender tcp = new Sender("tcp", Map.of(), write, messageBytes)) {
            for (int r = 0; r < rounds; r++) {
                if (r % 2 == 0) {
                    ours[r] = ucx.runFor(1);
                    theirs[r] = tcp.runFor(1);
                } else {
                    theirs[r] = tcp.runFor(1);
                    ours[r] = ucx.runFor(1);
                }
                Progress.roundDone(r + 1, rounds);
            }
        }
        return row(metric, ours, theirs, "tcp_transport_" + (write ? "put" : "get") + "_" + size(messageBytes));
    }

    private static String size(int bytes) {
        return bytes >= 1 << 20 ? (bytes >> 20) + "m" : (bytes >> 10) + "k";
    }

    private static BenchRow row(String metric, double[] ours, double[] theirs, String reference) {
        double[] ratios = new double[ours.length];
        for (int i = 0; i < ours.length; i++) {
            ratios[i] = ours[i] / theirs[i];
        }
        double lowest = Arrays.stream(ratios).min().orElseThrow();
        double highest = Arrays.stream(ratios).max().orElseThrow();
        System.err.printf(
                "transfer %s: %.2f GB/s vs %s %.2f GB/s (ratio %.3f, rounds %.3f-%.3f)%n",
                metric,
                Forks.median(ours) / 1e9,
                reference,
                Forks.median(theirs) / 1e9,
                Forks.median(ratios),
                lowest,
                highest);
        return new BenchRow(
                        metric,
                        Forks.median(ours) / 1e9,
                        "GB/s",
                        reference,
                        Forks.median(theirs) / 1e9,
                        Forks.median(ratios),
                        "higher")
                .withSpread(lowest, highest);
    }

    /** Iterations that take perftest about a second, from a short first run. */
    private static long perftestIterations(Path perftest, String test, int messageBytes, boolean plainMemory)
            throws Exception {
        long probe = Math.max(200, (256L << 20) / messageBytes);
        double bytesPerSecond = perftest(perftest, test, messageBytes, probe, plainMemory);
        return Math.max(probe, (long) (bytesPerSecond / messageBytes));
    }

    /**
     * One {@code ucx_perftest} run between a server and a client process on a free loopback port, its buffers in
     * ordinary memory when {@code plainMemory}; the client's overall bandwidth in bytes per second.
     */
    static double perftest(Path perftest, String test, int messageBytes, long iterations, boolean plainMemory)
            throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        List<String> args = List.of(
                "-t",
                test,
                "-s",
                Integer.toString(messageBytes),
                "-n",
                Long.toString(iterations),
                "-e",
                "-p",
                Integer.toString(port));
        Process server = start(perftest, args, null, plainMemory);
        try {
            Thread.sleep(300); // its listener; the client retries nothing
            Path out = Files.createTempFile("hicache-ucx-perftest", ".txt");
            try {
                Process client = start(perftest, args, out, plainMemory);
                if (!client.waitFor(120, TimeUnit.SECONDS) || client.exitValue() != 0) {
                    client.destroyForcibly();
                    throw new IOException("ucx_perftest client failed: " + Files.readString(out));
                }
                return parse(Files.readString(out, StandardCharsets.UTF_8));
            } finally {
                Files.deleteIfExists(out);
            }
        } finally {
            server.destroyForcibly();
            server.waitFor(10, TimeUnit.SECONDS);
        }
    }

    private static Process start(Path perftest, List<String> args, @Nullable Path out, boolean plainMemory)
            throws IOException {
        List<String> command = new ArrayList<>();
        command.add(perftest.toString());
        if (out != null) {
            command.add("127.0.0.1");
        }
        command.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        if (out != null) {
            pb.redirectOutput(out.toFile());
        } else {
            pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
        }
        // the transport's own settings: the same UCX transports, shared memory under peer-failure handling
        pb.environment().put("UCX_TLS", TLS);
        pb.environment().put("UCX_POSIX_ERROR_HANDLING", "y");
        pb.environment().put("UCX_SYSV_ERROR_HANDLING", "y");
        if (plainMemory) {
            pb.environment().put("UCX_ALLOC_PRIO", "heap");
        }
        return pb.start();
    }

    /** Bytes per second from the {@code Final:} line (overall bandwidth, UCX's MB of 2^20 bytes). */
    static double parse(String output) throws IOException {
        Matcher m = FINAL.matcher(output);
        if (!m.find()) {
            throw new IOException("no Final: line in ucx_perftest's output: " + output);
        }
        return Double.parseDouble(m.group(6)) * (1 << 20);
    }
}
