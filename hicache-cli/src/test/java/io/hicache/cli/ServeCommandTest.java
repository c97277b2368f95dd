package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.ChildJvm;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code hicache serve}: its help, its configuration errors, and a real daemon process stopped with SIGTERM. */
class ServeCommandTest {
    private static final Pattern LISTENING = Pattern.compile("HiCache daemon on 127\\.0\\.0\\.1:(\\d+) ");

    @Test
    void helpListsEverySettingWithItsDefaultAndThePrecedence() {
        HiCacheCliTest.Run help = HiCacheCliTest.run("serve", "--help");
        assertEquals(0, help.status());
        for (String line : List.of(
                "--server.port=N",
                "(default 7370)",
                "--server.host-size=BYTES",
                "(default 1GiB)",
                "--server.auth-token=TEXT",
                "--file.root=PATH",
                "HICACHE_SERVER_PORT",
                "docs/protocol.md")) {
            assertTrue(help.out().contains(line), "serve --help lacks '" + line + "':\n" + help.out());
        }
        // The file store's root as the daemon uses it, not the store's own default (issue 24, item 9).
        String flat = help.out().replaceAll("\\s+", " ");
        int at = flat.indexOf("--file.root=PATH");
        String fileRoot = flat.substring(at, flat.indexOf(" --", at + 5));
        assertTrue(fileRoot.contains("(default hicache-data/file)"), fileRoot);
        for (String line : List.of(
                "--server.max-partial-frame-bytes=BYTES",
                "--server.write-behind-max-tries=N",
                "--server.kv-events-config=JSON")) {
            assertTrue(help.out().contains(line), "serve --help lacks '" + line + "':\n" + help.out());
        }
    }

    @Test
    void configurationMistakesFailBeforeAnythingStarts() {
        HiCacheCliTest.Run typo = HiCacheCliTest.run("serve", "--server.prot", "1234");
        assertEquals(2, typo.status());
        assertTrue(typo.err().contains("did you mean --server.port?"), typo.err());
        HiCacheCliTest.Run open = HiCacheCliTest.run("serve", "--server.bind", "0.0.0.0");
        assertEquals(1, open.status());
        assertTrue(open.err().contains("set server.auth-token"), open.err());
        HiCacheCliTest.Run events =
                HiCacheCliTest.run("serve", "--server.kv-events-config", "{\"publisher\": \"pigeon\"}");
        assertEquals(1, events.status());
        assertTrue(
                events.err().contains("pigeon") && events.err().contains("available: zmq"),
                "the zmq publisher is on the command line's class path: " + events.err());
        HiCacheCliTest.Run json = HiCacheCliTest.run("serve", "--server.kv-events-config", "{\"publisher\": zmq}");
        assertEquals(2, json.status(), "malformed JSON is a bad argument, caught as the command line is read");
        assertTrue(json.err().contains("server.kv-events-config"), json.err());
    }

    @Test
    void aServedDaemonStopsOnSigtermWithEveryAcknowledgedPageInL3(@TempDir Path dir) throws Exception {
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : dir, "hicache-serve-test-");
        Path root = dir.resolve("store");
        ChildJvm daemon = ChildJvm.start(
                HiCacheCli.class,
                List.of(
                        "serve",
                        "--server.port",
                        "0",
                        "--server.metrics-port",
                        "0",
                        "--server.host-dir",
                        hostDir.toString(),
                        "--server.host-size",
                        "128MiB",
                        "--file.root",
                        root.toString(),
                        "--file.fsync",
                        "true"));
        try (Arena arena = Arena.ofShared()) {
            assertTrue(
                    daemon.awaitLine("HiCache daemon on ", 120, TimeUnit.SECONDS),
                    "the daemon did not start: " + daemon.lines());
            Matcher m = LISTENING.matcher(daemon.lines().stream()
                    .filter(l -> l.startsWith("HiCache daemon on "))
                    .findFirst()
                    .orElseThrow());
            assertTrue(m.find(), daemon.lines().toString());
            int port = Integer.parseInt(m.group(1));
            List<StoreKey> keys = keys(2000);
            PageBatch.Builder sources = PageBatch.builder(keys.size());
            for (StoreKey k : keys) {
                MemorySegment page = arena.allocate(16 * 1024);
                PagePattern.fill(page, k);
                sources.add(k, page);
            }
            String metrics;
            try (RemotePageStore client = RemotePageStore.open(RemoteStoreConfig.local(port, ""))) {
                BatchResult put = client.put(sources.build(), deadline()).get(60, TimeUnit.SECONDS);
                assertEquals(2000, put.count(PageStatus.OK), put::toString);
                metrics = client.daemonMetrics(deadline()).get(10, TimeUnit.SECONDS);
            }
            int status = daemon.terminate(Duration.ofSeconds(60));
            assertTrue(status == 0 || status == 143, "exit status " + status);
            assertTrue(
                    !metrics.matches("(?s).*\nhicache_server_write_behind_pending_pages 0(\\.0)?\n.*"),
                    "the write-behind had caught up before SIGTERM: the case checked nothing");
            try (FilePageStore l3 = FilePageStore.open(FileStoreConfig.at(root))) {
                PageBatch.Builder targets = PageBatch.builder(keys.size());
                for (StoreKey k : keys) {
                    targets.add(k, arena.allocate(16 * 1024));
                }
                PageBatch t = targets.build();
                BatchResult got = l3.get(t, deadline()).get(60, TimeUnit.SECONDS);
                assertEquals(2000, got.count(PageStatus.OK), got::toString);
                for (int i = 0; i < keys.size(); i++) {
                    assertEquals(-1, PagePattern.firstMismatch(t.page(i), keys.get(i), 0), "page " + i);
                }
            }
            try (Stream<Path> left = Files.list(hostDir)) {
                assertEquals(List.of(), left.toList(), "the slab file outlived the daemon");
            }
        } finally {
            daemon.kill();
            try (Stream<Path> left = Files.list(hostDir)) {
                for (Path p : left.toList()) {
                    Files.deleteIfExists(p);
                }
            }
            Files.deleteIfExists(hostDir);
        }
    }

    private static List<StoreKey> keys(int n) {
        Namespace ns = Namespace.of("serve-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        SplittableRandom random = new SplittableRandom();
        List<StoreKey> keys = new ArrayList<>(n);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < n; i++) {
            random.nextBytes(hash);
            keys.add(ns.key(PageHash.fromBytes(hash, 0)));
        }
        return keys;
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }
}
