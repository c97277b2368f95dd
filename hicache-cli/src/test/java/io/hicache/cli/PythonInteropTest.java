package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.ChildJvm;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Python client (clients/python) against the Java side: its own test suite run against real daemon processes
 * of this build, the page names of its SGLang hash chain against {@link PageHasher}, and pages put by one language
 * read back by the other, every byte checked. Skipped where there is no {@code python3}.
 */
class PythonInteropTest {
    private static final Path CLIENT =
            Path.of("..", "clients", "python").toAbsolutePath().normalize();

    @BeforeAll
    static void needPython() {
        Assumptions.assumeTrue(
                python("-c", "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)").status == 0,
                "python3 (3.10 or later) is not on the PATH");
    }

    record Run(int status, String out) {}

    /** Runs {@code python3 args} in the client's folder with the package importable; stdin {@code input}. */
    static Run python(String... args) {
        return python(null, Map.of(), args);
    }

    static Run python(String input, Map<String, String> env, String... args) {
        List<String> command = new ArrayList<>(List.of("python3"));
        command.addAll(List.of(args));
        try {
            ProcessBuilder b =
                    new ProcessBuilder(command).directory(CLIENT.toFile()).redirectErrorStream(true);
            b.environment().put("PYTHONPATH", CLIENT.toString());
            b.environment().put("PYTHONDONTWRITEBYTECODE", "1");
            b.environment().putAll(env);
            Process p = b.start();
            if (input != null) {
                p.getOutputStream().write(input.getBytes(StandardCharsets.UTF_8));
            }
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                return new Run(-1, out + "\n(timed out)");
            }
            return new Run(p.exitValue(), out);
        } catch (IOException e) {
            return new Run(-1, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Run(-1, e.toString());
        }
    }

    /** The client's own tests, each starting daemon processes of this build ({@code hicache serve}). */
    @Test
    void thePythonClientsOwnTestsPass() {
        String daemon = ChildJvm.command(HiCacheCli.class).stream()
                        .map(PythonInteropTest::shellQuote)
                        .collect(Collectors.joining(" "))
                + " serve";
        Run run = python(
                null, Map.of("HICACHE_DAEMON_CMD", daemon), "-m", "unittest", "discover", "-s", "tests", "-t", ".");
        System.out.println(run.out);
        assertEquals(0, run.status, run.out);
        assertTrue(run.out.contains("OK"), run.out);
    }

    static String shellQuote(String s) {
        return "'" + s.replace("'", "'\"'\"'") + "'";
    }

    /** Python's port of SGLang's get_hash_str names the pages of random token lists as PageHasher does. */
    @Test
    void pageHashesAgreeWithJava() {
        SplittableRandom random = new SplittableRandom(23);
        StringBuilder input = new StringBuilder();
        List<String> expected = new ArrayList<>();
        for (int c = 0; c < 40; c++) {
            int pageSize = 1 + random.nextInt(64);
            int[] tokens = new int[random.nextInt(300)];
            for (int i = 0; i < tokens.length; i++) {
                // Token ids over the whole u32 range as SGLang would write them (4 bytes, little-endian, unsigned).
                tokens[i] = random.nextInt(4) == 0 ? random.nextInt() : random.nextInt(200_000);
            }
            input.append("{\"page_size\": ")
                    .append(pageSize)
                    .append(", \"tokens\": [")
                    .append(Arrays.stream(tokens)
                            .mapToObj(t -> Long.toString(Integer.toUnsignedLong(t)))
                            .collect(Collectors.joining(", ")))
                    .append("]}\n");
            expected.add(new PageHasher(pageSize)
                    .hashPages(tokens).asList().stream().map(h -> h.toHex()).collect(Collectors.joining(",")));
        }
        Run run = python(input.toString(), Map.of(), "-m", "hicache.hashing");
        assertEquals(0, run.status, run.out);
        assertEquals(expected, run.out.lines().toList());
    }

    /** Pages put by Python are read by Java's remote store, and the reverse, over TCP and the same-host path. */
    @Test
    void pagesPutByOneLanguageAreReadByTheOther() throws Exception {
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-interop-");
        Settings settings = Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.host-dir", hostDir.toString())
                .flag("server.host-size", "64MiB")
                .flag("server.store", "none")
                .build();
        Namespace ns = Namespace.of("interop/model-1", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 1, 2);
        int pageSize = 16;
        int pageBytes = 12_288;
        try (HiCacheServer server = HiCacheServer.start(ServerConfig.from(settings));
                RemotePageStore javaStore = RemotePageStore.open(RemoteStoreConfig.local(server.port(), ""))) {
            for (boolean local : new boolean[] {false, true}) {
                int[] pythonTokens = tokens(local ? 11 : 12, 20 * pageSize + 5);
                Run put = python(
                        request("put", server.port(), pythonTokens, pageSize, pageBytes, local),
                        Map.of(),
                        "interop/peer.py");
                assertEquals(0, put.status, put.out);
                assertEquals(20, count(put.out, "OK"), put.out);
                PageHashes hashes = new PageHasher(pageSize).hashPages(pythonTokens);
                try (Arena arena = Arena.ofShared()) {
                    List<StoreKey> keys = new ArrayList<>();
                    List<MemorySegment> targets = new ArrayList<>();
                    for (PageHash h : hashes.asList()) {
                        keys.add(ns.key(h));
                        targets.add(arena.allocate(pageBytes));
                    }
                    BatchResult got = javaStore
                            .get(PageBatch.of(keys, targets), Deadline.after(Duration.ofSeconds(10)))
                            .get(20, TimeUnit.SECONDS);
                    assertEquals(20, got.count(PageStatus.OK), "Java reads every page Python put");
                    for (int i = 0; i < keys.size(); i++) {
                        assertEquals(
                                MemorySegment.ofArray(body(hashes.get(i), pageBytes))
                                        .mismatch(targets.get(i)),
                                -1,
                                "page " + i + " has Python's bytes");
                    }

                    int[] javaTokens = tokens(local ? 13 : 14, 9 * pageSize);
                    PageHashes javaHashes = new PageHasher(pageSize).hashPages(javaTokens);
                    List<StoreKey> javaKeys = new ArrayList<>();
                    List<MemorySegment> sources = new ArrayList<>();
                    for (PageHash h : javaHashes.asList()) {
                        javaKeys.add(ns.key(h));
                        MemorySegment page = arena.allocate(pageBytes);
                        page.copyFrom(MemorySegment.ofArray(body(h, pageBytes)));
                        sources.add(page);
                    }
                    BatchResult stored = javaStore
                            .put(PageBatch.of(javaKeys, sources), Deadline.after(Duration.ofSeconds(10)))
                            .get(20, TimeUnit.SECONDS);
                    assertEquals(9, stored.count(PageStatus.OK), "Java's put");
                    Run get = python(
                            request("get", server.port(), javaTokens, pageSize, pageBytes, local),
                            Map.of(),
                            "interop/peer.py");
                    assertEquals(0, get.status, get.out);
                    assertEquals(9, count(get.out, "OK"), get.out);
                    assertTrue(get.out.contains("\"mismatches\": 0"), "Python reads Java's bytes: " + get.out);
                }
            }
        } finally {
            try (var files = Files.walk(hostDir)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private static int[] tokens(long seed, int n) {
        SplittableRandom random = new SplittableRandom(seed);
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(150_000);
        }
        return t;
    }

    /** The page bytes both sides compute: byte k of the page with hash h is (h[k % 32] + k) & 0xFF. */
    private static byte[] body(PageHash hash, int length) {
        byte[] h = hash.toBytes();
        byte[] out = new byte[length];
        for (int k = 0; k < length; k++) {
            out[k] = (byte) ((h[k % 32] & 0xFF) + k);
        }
        return out;
    }

    private static String request(String op, int port, int[] tokens, int pageSize, int pageBytes, boolean local) {
        return "{\"op\": \"" + op + "\", \"port\": " + port + ", \"model\": \"interop/model-1\", \"dtype\": \"bf16\", "
                + "\"order\": 0, \"tp_rank\": 1, \"tp_size\": 2, \"page_size\": " + pageSize + ", \"page_bytes\": "
                + pageBytes + ", \"local\": " + local + ", \"tokens\": ["
                + Arrays.stream(tokens).mapToObj(Integer::toString).collect(Collectors.joining(", ")) + "]}";
    }

    private static int count(String out, String status) {
        Matcher m = Pattern.compile("\"" + status + "\"").matcher(out);
        int n = 0;
        while (m.find()) {
            n++;
        }
        return n;
    }
}
