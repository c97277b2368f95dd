package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import io.hicache.storage.remote.PageLease;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.ChildJvm;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 37, findings 5 and 6: what a new user's first mistakes print. Each error is one line in the user's words (what,
 * which value, what to do) with exit status 1 for a failure and 2 for bad arguments, the stack trace only with
 * {@code --debug}; the options and habits other servers taught them work or are answered.
 */
class FirstHourTest {
    @TempDir
    Path dir;

    private HiCacheServer daemon(int metricsPort) {
        return HiCacheServer.start(ServerConfig.from(Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", Integer.toString(metricsPort))
                .flag("server.store", "none")
                .flag("server.host-size", "16MiB")
                .flag("server.host-dir", dir.toString())
                .build()));
    }

    /** The line of {@code err} that says what went wrong (warnings about the environment aside). */
    private static List<String> errorLines(String err) {
        return err.lines().filter(l -> !l.startsWith("hicache: warning:")).toList();
    }

    private static void assertOneLineInWords(HiCacheCliTest.Run run, String... phrases) {
        List<String> lines = errorLines(run.err());
        assertEquals(1, lines.size(), () -> "one line, not:\n" + run.err());
        for (String phrase : phrases) {
            assertTrue(lines.getFirst().contains(phrase), () -> "'" + phrase + "' missing from: " + lines.getFirst());
        }
        assertFalse(lines.getFirst().contains("Exception"), lines.getFirst());
        assertFalse(lines.getFirst().contains("[STORE_"), "error codes only with --debug: " + lines.getFirst());
    }

    @Test
    void aPortInUseSaysWhichAndWhatToDo() {
        try (HiCacheServer running = daemon(-1)) {
            String port = Integer.toString(running.port());
            HiCacheCliTest.Run run = HiCacheCliTest.run(
                    "serve",
                    "--server.port",
                    port,
                    "--server.metrics-port",
                    "-1",
                    "--server.store",
                    "none",
                    "--server.host-size",
                    "16MiB",
                    "--server.host-dir",
                    dir.toString());
            assertEquals(1, run.status(), run.err());
            assertOneLineInWords(run, "port " + port, "in use", "--port");
        }
    }

    @Test
    void statsPointedAtTheMetricsPortSaysItIsHttp() {
        try (HiCacheServer running = daemon(0)) {
            long start = System.nanoTime();
            HiCacheCliTest.Run run = HiCacheCliTest.run("stats", "--port", Integer.toString(running.metricsPort()));
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
            assertEquals(1, run.status(), run.err());
            assertOneLineInWords(run, "answers HTTP", "metrics port", "server.port");
            assertTrue(seconds < 6, "it took " + seconds + " s");
        }
    }

    @Test
    void topEndsInOneLineWhenTheDaemonStops() throws Exception {
        HiCacheServer running = daemon(-1);
        String port = Integer.toString(running.port());
        CompletableFuture<HiCacheCliTest.Run> top =
                CompletableFuture.supplyAsync(() -> HiCacheCliTest.run("top", "--port", port, "--interval", "200ms"));
        Thread.sleep(700);
        running.close();
        HiCacheCliTest.Run run = top.get(60, TimeUnit.SECONDS);
        assertEquals(1, run.status(), run.err());
        assertOneLineInWords(run, "stopped answering", "top ends", "127.0.0.1:" + port);
    }

    @Test
    void aFailureShowsItsStackTraceOnlyWithDebug() throws Exception {
        int closed;
        try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            closed = free.getLocalPort();
        }
        HiCacheCliTest.Run plain = HiCacheCliTest.run("stats", "--port", Integer.toString(closed));
        assertEquals(1, plain.status());
        assertOneLineInWords(plain, "connection refused", "127.0.0.1:" + closed, "hicache serve");
        HiCacheCliTest.Run debug = HiCacheCliTest.run("stats", "--port", Integer.toString(closed), "--debug");
        assertEquals(1, debug.status());
        assertTrue(debug.err().contains("\tat "), debug.err());
        assertTrue(debug.err().contains("error code STORE_UNAVAILABLE"), debug.err());
    }

    @Test
    void aMistypedOptionIsNamedEvenWhenARequiredOneIsMissing() {
        HiCacheCliTest.Run run = HiCacheCliTest.run("conformance", "--stor", "memory");
        assertEquals(2, run.status());
        assertTrue(run.err().contains("unknown option '--stor'"), run.err());
        assertTrue(run.err().contains("did you mean --store?"), run.err());
    }

    @Test
    void adminFlushSaysItIsSglangsFlushCacheNotFlushAll() {
        HiCacheCliTest.Run run = HiCacheCliTest.run("admin", "flush", "--help");
        assertEquals(0, run.status(), run.err());
        assertTrue(run.out().contains("SGLang's /flush_cache, not Redis' FLUSHALL"), run.out());
        assertTrue(run.out().contains("L3 keeps every page"), run.out());
    }

    @Test
    void aMisspeltEnvironmentVariableIsWarnedAbout() {
        HiCacheCliTest.Run misspelt = HiCacheCliTest.runWith(Map.of("HICACHE_SERVER_PROT", "7401"), "version");
        assertEquals(0, misspelt.status());
        assertTrue(
                misspelt.err().contains("HICACHE_SERVER_PROT is not a setting")
                        && misspelt.err().contains("did you mean HICACHE_SERVER_PORT?"),
                misspelt.err());
        HiCacheCliTest.Run known = HiCacheCliTest.runWith(
                Map.of(
                        "HICACHE_SERVER_PORT", "7401",
                        "HICACHE_FILE_ROOT", "/data",
                        "HICACHE_RATIO", "2",
                        "HICACHE_JAVA_OPTS", "-Xmx1g"),
                "version");
        assertFalse(known.err().contains("warning"), known.err());
    }

    @Test
    void serveTakesThePortAndHostOptionsOtherServersDo() throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = free.getLocalPort();
        }
        for (String portOption : List.of("--port", "-p")) {
            ChildJvm serve = ChildJvm.start(
                    HiCacheCli.class,
                    List.of(
                            "serve",
                            portOption,
                            Integer.toString(port),
                            "--host",
                            "127.0.0.1",
                            "--server.store",
                            "none",
                            "--server.metrics-port",
                            "-1",
                            "--server.host-size",
                            "16MiB",
                            "--server.host-dir",
                            dir.toString()));
            try {
                assertTrue(
                        serve.awaitLine("HiCache daemon on 127.0.0.1:" + port + " ", 60, TimeUnit.SECONDS),
                        () -> serve.lines().toString());
                // 143: the JVM's status after a SIGTERM, once the daemon has stopped gracefully
                assertEquals(
                        143,
                        serve.terminate(Duration.ofSeconds(30)),
                        () -> serve.lines().toString());
                assertEquals("stopped", serve.lines().getLast());
            } finally {
                serve.kill();
            }
        }
        HiCacheCliTest.Run both = HiCacheCliTest.run("serve", "--port", "1", "--server.port", "2");
        assertEquals(2, both.status());
        assertTrue(both.err().contains("--port and --server.port name the same setting"), both.err());
    }

    /** Pages read in place through a lease never cross the socket: top and stats count them apart, not as nothing. */
    @Test
    void sameHostTrafficIsCounted() throws Exception {
        try (HiCacheServer running = daemon(-1);
                RemotePageStore client = RemotePageStore.open(RemoteStoreConfig.local(running.port(), ""));
                Arena arena = Arena.ofShared()) {
            Namespace ns = Namespace.of("first-hour", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
            List<StoreKey> keys =
                    List.of(ns.key(PageHash.fromHex("01".repeat(32))), ns.key(PageHash.fromHex("02".repeat(32))));
            PageBatch pages = PageBatch.of(
                    keys,
                    List.of(
                            arena.allocate(64 << 10).fill((byte) 1),
                            arena.allocate(64 << 10).fill((byte) 2)));
            assertEquals(
                    2,
                    client.put(pages, Deadline.after(Duration.ofSeconds(10)))
                            .get()
                            .successCount());
            CompletableFuture<HiCacheCliTest.Run> top = CompletableFuture.supplyAsync(() -> HiCacheCliTest.run(
                    "top", "--port", Integer.toString(running.port()), "--interval", "1s", "--count", "1"));
            Thread.sleep(300); // the lease lands between top's two readings
            try (PageLease lease = client.lease(
                            keys, 64 << 10, Duration.ofSeconds(5), Deadline.after(Duration.ofSeconds(10)))
                    .get()) {
                assertEquals(PageStatus.OK, lease.status(1));
            }
            HiCacheCliTest.Run shown = top.get(60, TimeUnit.SECONDS);
            assertEquals(0, shown.status(), shown.err());
            assertFalse(shown.out().contains("same host: 0 B/s read"), shown.out());
            assertTrue(shown.out().contains("same host: "), shown.out());
            HiCacheCliTest.Run stats = HiCacheCliTest.run("stats", "--port", Integer.toString(running.port()));
            assertTrue(stats.out().contains("same host: 128 KiB read"), stats.out());
        }
    }

    /** q quits top on a terminal (a pseudo-terminal from util-linux's script here); Ctrl-C stays the other way out. */
    @Test
    void qQuitsTop() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "no script(1) to give top a terminal");
        try (HiCacheServer running = daemon(-1)) {
            List<String> command = new ArrayList<>(ChildJvm.command(HiCacheCli.class));
            command.addAll(List.of("top", "--port", Integer.toString(running.port()), "--interval", "300ms"));
            String shell = String.join(
                    " ",
                    command.stream()
                            .map(a -> "'" + a.replace("'", "'\\''") + "'")
                            .toList());
            Process p = new ProcessBuilder("/usr/bin/script", "-qfec", shell, "/dev/null")
                    .redirectErrorStream(true)
                    .start();
            try {
                InputStream out = p.getInputStream();
                StringBuilder seen = new StringBuilder();
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!seen.toString().contains("requests/s") && System.nanoTime() < end) {
                    int b = out.read();
                    if (b < 0) {
                        break;
                    }
                    seen.append((char) b);
                }
                assertTrue(seen.toString().contains("requests/s"), seen::toString);
                p.getOutputStream().write('q');
                p.getOutputStream().flush();
                assertTrue(p.waitFor(10, TimeUnit.SECONDS), "top is still running 10 s after q");
                assertEquals(0, p.exitValue());
            } finally {
                p.destroyForcibly();
            }
        }
    }
}
