package io.hicache.bench.server;

import io.hicache.bench.BenchRow;
import io.hicache.bench.ServerProcess;
import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.store.PageBatch;
import io.hicache.storage.remote.ClientTls;
import io.hicache.storage.remote.DaemonAdmin;
import io.hicache.storage.remote.PrefixHits;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.storage.remote.protocol.Hello;
import io.hicache.storage.remote.protocol.ReadRequest;
import io.hicache.storage.remote.protocol.RequestEncoder;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Issue 42's rows, the daemon against itself and against Redis in one run, rounds alternating:
 *
 * <ul>
 *   <li>{@code prefix_hits_keys_per_s_slab} and {@code _l3}: PREFIX_HITS of 1,000-key chains (one request each,
 *       {@value #IN_FLIGHT} in flight on one connection) against Redis's {@code EXISTS} of 1,000 keys, the
 *       peer's own multi-key existence query, pipelined alike; {@code _l3} with a file store attached, which every
 *       question also asks. Aim: 150k keys/s.
 *   <li>{@code server_tls_set_1m}, {@code server_tls_get_1m}: 1 MiB pages put and got through the Java client over
 *       TLS against the same client over plaintext, same daemon settings; which TLS the daemon used is in the
 *       reference's name.
 * </ul>
 *
 * {@code -Dhicache.bench.server.routerOnly=true} runs only these.
 */
final class RouterRows {
    private static final int KEYS = 1000;
    private static final int IN_FLIGHT = 8;
    private static final double KEYS_AIM = 150_000;

    private RouterRows() {}

    static boolean only() {
        return Boolean.getBoolean("hicache.bench.server.routerOnly");
    }

    static void run(boolean quick, List<BenchRow> rows) throws Exception {
        prefixRows(quick, rows);
        tlsRows(quick, rows);
    }

    /* ---------------------------------------------------------------- PREFIX_HITS vs EXISTS */

    private static void prefixRows(boolean quick, List<BenchRow> rows) throws Exception {
        int requests = quick ? 300 : 3000;
        int rounds = quick ? 1 : 5;
        Path l3 = Files.createTempDirectory("hicache-bench-l3-");
        try (ServerProcess daemon = ServerProcess.hicache(256L << 20, List.of("--server.store-root", l3.toString()));
                ServerProcess redis = ServerProcess.redis();
                RemotePageStore client = RemotePageStore.open(RemoteStoreConfig.local(daemon.port, ""));
                Arena arena = Arena.ofShared()) {
            Namespace ns =
                    Namespace.builder("bench-router").kvDtype(KvDtype.BFLOAT16).build();
            List<StoreKey> keys = chain(ns, KEYS);
            PageBatch.Builder pages = PageBatch.builder(KEYS);
            for (StoreKey k : keys) {
                pages.add(k, arena.allocate(4096));
            }
            client.put(pages.build(), deadline()).get(60, TimeUnit.SECONDS);
            byte[] exists = existsCommand(redis);
            byte[] prefix = prefixFrame(keys);
            for (String tier : new String[] {"slab", "l3"}) {
                if (tier.equals("l3")) {
                    new DaemonAdmin(client)
                            .attach(
                                    "file",
                                    Map.of("file.root", l3.resolve("store").toString()),
                                    Duration.ofSeconds(30))
                            .get(60, TimeUnit.SECONDS);
                    client.put(pages.build(), deadline()).get(60, TimeUnit.SECONDS); // EXISTS: already in the slab
                }
                List<Double> mine = new ArrayList<>();
                List<Double> theirs = new ArrayList<>();
                List<Double> ratios = new ArrayList<>();
                for (int r = 0; r < rounds + 1; r++) {
                    boolean warmup = r == 0;
                    double a = r % 2 == 0 ? prefixKeysPerSecond(daemon.port, prefix, requests) : 0;
                    double b = existsKeysPerSecond(redis.port, exists, requests);
                    if (a == 0) {
                        a = prefixKeysPerSecond(daemon.port, prefix, requests);
                    }
                    if (!warmup) {
                        mine.add(a);
                        theirs.add(b);
                        ratios.add(a / b);
                    }
                    say("prefix hits (" + tier + ") round " + r + ": " + Math.round(a) + " keys/s vs EXISTS "
                            + Math.round(b));
                }
                PrefixHits check = client.prefixHits(keys, deadline()).get(10, TimeUnit.SECONDS);
                if (check.any() != KEYS || (tier.equals("l3") && check.l3State() != PrefixHits.L3State.ANSWERED)) {
                    throw new IllegalStateException("the benchmark's chain is not whole: " + check);
                }
                rows.add(new BenchRow(
                                "prefix_hits_keys_per_s_" + tier,
                                ServerSuite.median(mine),
                                "keys/s",
                                "redis_exists_keys_per_s",
                                ServerSuite.median(theirs),
                                ServerSuite.median(ratios),
                                "higher")
                        .withSpread(
                                ratios.stream().min(Double::compare).orElseThrow(),
                                ratios.stream().max(Double::compare).orElseThrow()));
                say("prefix hits (" + tier + "): " + Math.round(ServerSuite.median(mine)) + " keys/s (aim "
                        + Math.round(KEYS_AIM) + ")");
            }
        } finally {
            deleteTree(l3);
        }
    }

    private static List<StoreKey> chain(Namespace ns, int n) {
        SplittableRandom random = new SplittableRandom(42);
        List<StoreKey> keys = new ArrayList<>(n);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < n; i++) {
            random.nextBytes(hash);
            keys.add(ns.key(PageHash.fromBytes(hash, 0)));
        }
        return keys;
    }

    /**
     * PREFIX_HITS as the EXISTS side is measured: one frame encoded once and sent {@code requests} times,
     * {@value #IN_FLIGHT} in flight on one plain socket, so that both sides measure the server and not a client.
     */
    private static double prefixKeysPerSecond(int port, byte[] frame, int requests) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setTcpNoDelay(true);
            OutputStream out = s.getOutputStream();
            DataInputStream in = new DataInputStream(new BufferedInputStream(s.getInputStream()));
            ByteBuf hello = RequestEncoder.frame(
                    ByteBufAllocator.DEFAULT, new Hello(Wire.VERSION_3, "", WireChecksum.CRC32C), 0, 5000);
            try {
                out.write(ByteBufUtil.getBytes(hello));
            } finally {
                hello.release();
            }
            out.flush();
            readAnswer(in, Wire.HELLO);
            long start = System.nanoTime();
            int sent = 0;
            int answered = 0;
            while (answered < requests) {
                while (sent < requests && sent - answered < IN_FLIGHT) {
                    out.write(frame);
                    sent++;
                }
                out.flush();
                byte[] answer = readAnswer(in, Wire.PREFIX_HITS);
                int any = ((answer[8] & 0xFF) << 24)
                        | ((answer[9] & 0xFF) << 16)
                        | ((answer[10] & 0xFF) << 8)
                        | (answer[11] & 0xFF);
                if (any != KEYS) {
                    throw new IOException("PREFIX_HITS answered a run of " + any);
                }
                answered++;
            }
            return (double) requests * KEYS / ((System.nanoTime() - start) / 1e9);
        }
    }

    /** One PREFIX_HITS request of {@code keys}, as its frame's bytes. */
    private static byte[] prefixFrame(List<StoreKey> keys) {
        ByteBuf frame = RequestEncoder.frame(
                ByteBufAllocator.DEFAULT,
                new ReadRequest.PrefixHits(keys.getFirst().namespace(), keys),
                1,
                30_000);
        try {
            return ByteBufUtil.getBytes(frame);
        } finally {
            frame.release();
        }
    }

    /** Reads one answer frame; its payload (after the 16-byte header). */
    private static byte[] readAnswer(DataInputStream in, int op) throws IOException {
        int length = in.readInt();
        byte[] rest = new byte[length];
        in.readFully(rest);
        if ((rest[0] & 0xFF) != (op | Wire.RESPONSE)) {
            throw new IOException("answer op 0x" + Integer.toHexString(rest[0] & 0xFF) + " to " + Wire.opName(op));
        }
        return java.util.Arrays.copyOfRange(rest, Wire.HEADER_BYTES, length);
    }

    /** Sets {@value #KEYS} keys in Redis and returns one pipelined {@code EXISTS} of all of them, in RESP. */
    private static byte[] existsCommand(ServerProcess redis) throws IOException {
        StringBuilder exists = new StringBuilder("*" + (KEYS + 1) + "\r\n$6\r\nEXISTS\r\n");
        try (Socket s = new Socket("127.0.0.1", redis.port)) {
            OutputStream out = s.getOutputStream();
            InputStream in = new BufferedInputStream(s.getInputStream());
            StringBuilder sets = new StringBuilder();
            for (int i = 0; i < KEYS; i++) {
                String key = "bench-router-key-" + String.format("%032d", i); // as long as a 32-byte hash
                sets.append("*3\r\n$3\r\nSET\r\n$")
                        .append(key.length())
                        .append("\r\n")
                        .append(key)
                        .append("\r\n$1\r\nx\r\n");
                exists.append('$')
                        .append(key.length())
                        .append("\r\n")
                        .append(key)
                        .append("\r\n");
            }
            out.write(sets.toString().getBytes(StandardCharsets.US_ASCII));
            out.flush();
            for (int i = 0; i < KEYS; i++) {
                readLine(in);
            }
        }
        return exists.toString().getBytes(StandardCharsets.US_ASCII);
    }

    private static double existsKeysPerSecond(int port, byte[] exists, int requests) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setTcpNoDelay(true);
            OutputStream out = s.getOutputStream();
            InputStream in = new BufferedInputStream(s.getInputStream());
            long start = System.nanoTime();
            int sent = 0;
            int answered = 0;
            while (answered < requests) {
                while (sent < requests && sent - answered < IN_FLIGHT) {
                    out.write(exists);
                    sent++;
                }
                out.flush();
                String answer = readLine(in);
                if (!answer.equals(":" + KEYS)) {
                    throw new IOException("EXISTS answered " + answer);
                }
                answered++;
            }
            return (double) requests * KEYS / ((System.nanoTime() - start) / 1e9);
        }
    }

    private static String readLine(InputStream in) throws IOException {
        StringBuilder line = new StringBuilder();
        for (int c; (c = in.read()) != '\n'; ) {
            if (c < 0) {
                throw new IOException("Redis closed the connection");
            }
            if (c != '\r') {
                line.append((char) c);
            }
        }
        return line.toString();
    }

    /* ---------------------------------------------------------------- TLS vs plaintext */

    private static void tlsRows(boolean quick, List<BenchRow> rows) throws Exception {
        Path certs = Files.createTempDirectory("hicache-bench-tls-");
        try {
            makeCertificates(certs);
            long pageBytes = 1 << 20;
            int pagesPerRound = quick ? 64 : 512;
            int rounds = quick ? 1 : 5;
            List<String> tlsFlags = List.of(
                    "--server.tls-cert", certs.resolve("server.pem").toString(),
                    "--server.tls-key", certs.resolve("server.key").toString());
            try (ServerProcess plain = ServerProcess.hicache(2L * pagesPerRound * pageBytes);
                    ServerProcess tls = ServerProcess.hicache(2L * pagesPerRound * pageBytes, tlsFlags);
                    RemotePageStore toPlain = RemotePageStore.open(RemoteStoreConfig.local(plain.port, ""));
                    RemotePageStore toTls = RemotePageStore.open(RemoteStoreConfig.local(tls.port, "")
                            .withTls(ClientTls.trusting(certs.resolve("ca.pem").toString())));
                    Arena arena = Arena.ofShared()) {
                String provider = tls.startLine().contains("TLS by OpenSSL") ? "openssl" : "jdk";
                List<Double> setMine = new ArrayList<>();
                List<Double> setTheirs = new ArrayList<>();
                List<Double> getMine = new ArrayList<>();
                List<Double> getTheirs = new ArrayList<>();
                MemorySegment body = arena.allocate(pageBytes);
                for (int r = 0; r < rounds + 1; r++) {
                    double[] a = r % 2 == 0 ? roundGbps(toTls, arena, body, pagesPerRound, r) : null;
                    double[] b = roundGbps(toPlain, arena, body, pagesPerRound, r);
                    if (a == null) {
                        a = roundGbps(toTls, arena, body, pagesPerRound, r);
                    }
                    if (r > 0) {
                        setMine.add(a[0]);
                        getMine.add(a[1]);
                        setTheirs.add(b[0]);
                        getTheirs.add(b[1]);
                    }
                    say("TLS (" + provider + ") round " + r + ": set " + String.format("%.2f", a[0])
                            + " GB/s vs " + String.format("%.2f", b[0]) + ", get " + String.format("%.2f", a[1])
                            + " vs " + String.format("%.2f", b[1]));
                }
                rows.add(ratioRow("server_tls_set_1m", setMine, setTheirs, "server_plaintext_set_1m_" + provider));
                rows.add(ratioRow("server_tls_get_1m", getMine, getTheirs, "server_plaintext_get_1m_" + provider));
            }
        } finally {
            deleteTree(certs);
        }
    }

    /** Puts then gets {@code pages} 1 MiB pages of a fresh namespace, 8 to a batch, 4 batches in flight: GB/s each. */
    private static double[] roundGbps(RemotePageStore store, Arena arena, MemorySegment body, int pages, int round)
            throws Exception {
        Namespace ns = Namespace.builder("bench-tls-" + round + "-" + System.nanoTime())
                .kvDtype(KvDtype.BFLOAT16)
                .build();
        List<StoreKey> keys = chain(ns, pages);
        int batch = 8;
        long start = System.nanoTime();
        List<CompletableFuture<?>> window = new ArrayList<>();
        for (int i = 0; i < pages; i += batch) {
            PageBatch.Builder b = PageBatch.builder(batch);
            for (int j = i; j < i + batch; j++) {
                b.add(keys.get(j), body);
            }
            if (window.size() == 4) {
                window.removeFirst().get(60, TimeUnit.SECONDS);
            }
            window.add(store.put(b.build(), deadline()));
        }
        for (CompletableFuture<?> f : window) {
            f.get(60, TimeUnit.SECONDS);
        }
        double set = pages * body.byteSize() / ((System.nanoTime() - start) / 1e9) / 1e9;
        List<MemorySegment> targets = new ArrayList<>();
        for (int i = 0; i < 4 * batch; i++) {
            targets.add(arena.allocate(body.byteSize()));
        }
        window.clear();
        start = System.nanoTime();
        int slot = 0;
        for (int i = 0; i < pages; i += batch) {
            PageBatch.Builder b = PageBatch.builder(batch);
            for (int j = i; j < i + batch; j++) {
                b.add(keys.get(j), targets.get(slot++ % targets.size()));
            }
            if (window.size() == 4) {
                window.removeFirst().get(60, TimeUnit.SECONDS);
            }
            window.add(store.get(b.build(), deadline()));
        }
        for (CompletableFuture<?> f : window) {
            f.get(60, TimeUnit.SECONDS);
        }
        double get = pages * body.byteSize() / ((System.nanoTime() - start) / 1e9) / 1e9;
        store.clear(ns, deadline()).get(60, TimeUnit.SECONDS);
        return new double[] {set, get};
    }

    private static BenchRow ratioRow(String metric, List<Double> mine, List<Double> theirs, String reference) {
        List<Double> ratios = new ArrayList<>();
        for (int i = 0; i < mine.size(); i++) {
            ratios.add(mine.get(i) / theirs.get(i));
        }
        return new BenchRow(
                        metric,
                        ServerSuite.median(mine),
                        "GB/s",
                        reference,
                        ServerSuite.median(theirs),
                        ServerSuite.median(ratios),
                        "higher")
                .withSpread(
                        ratios.stream().min(Double::compare).orElseThrow(),
                        ratios.stream().max(Double::compare).orElseThrow());
    }

    private static void makeCertificates(Path dir) throws IOException, InterruptedException {
        Files.writeString(dir.resolve("server.ext"), "subjectAltName=IP:127.0.0.1\n");
        openssl(
                dir,
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=bench-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem");
        openssl(
                dir,
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                "/CN=bench-daemon",
                "-keyout",
                "server.key",
                "-out",
                "server.csr");
        openssl(
                dir,
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.pem");
    }

    private static void openssl(Path dir, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("openssl"));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command)
                .directory(dir.toFile())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("openssl " + String.join(" ", args) + " failed (the TLS rows need openssl): " + out);
        }
    }

    /** A line of what was measured, on standard error (the result file gets the rows). */
    private static void say(String line) {
        System.err.println("server/router: " + line);
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
