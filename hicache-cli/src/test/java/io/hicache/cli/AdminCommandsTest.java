package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code hicache admin flush} and {@code hicache admin store ...} against a running daemon with a file store. */
class AdminCommandsTest {
    private static final String TOKEN = "s3cret";

    @Test
    void flushAndStoreCommandsChangeARunningDaemon(@TempDir Path dir) throws Exception {
        Path first = dir.resolve("l3-first");
        Path second = dir.resolve("l3-second");
        HiCacheServer server = HiCacheServer.start(ServerConfig.from(Settings.builder()
                .flag("server.bind", "127.0.0.1")
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "file")
                .flag("file.root", first.toString())
                .flag("server.auth-token", TOKEN)
                .flag("server.host-size", "64MiB")
                .flag("server.host-dir", dir.resolve("slab").toString())
                .build()));
        try {
            String port = Integer.toString(server.port());
            putThreePages(server.port());

            HiCacheCliTest.Run show = admin(port, "store", "show");
            assertEquals(0, show.status(), show.err());
            assertEquals(
                    "L3 store: 'file' at " + first + "\n",
                    show.out().replace(first.toRealPath().toString(), first.toString()));
            HiCacheCliTest.Run noToken = HiCacheCliTest.run("admin", "store", "show", "--port", port);
            assertEquals(1, noToken.status(), noToken.out());
            assertTrue(noToken.err().contains("wrong auth token"), noToken.err());

            HiCacheCliTest.Run flush = admin(port, "flush");
            assertEquals(0, flush.status(), flush.err());
            assertTrue(flush.out().contains("dropped 3 pages, kept 0"), flush.out());

            HiCacheCliTest.Run detach = admin(port, "store", "detach", "--timeout", "10s");
            assertEquals(0, detach.status(), detach.err());
            assertTrue(detach.out().startsWith("detached the L3 store 'file' at "), detach.out());
            assertEquals("L3 store: none\n", admin(port, "store", "show").out());
            assertEquals(
                    "no L3 store was attached\n", admin(port, "store", "detach").out());

            HiCacheCliTest.Run unknown = admin(port, "store", "attach", "nosuchstore");
            assertEquals(1, unknown.status(), unknown.out());
            assertTrue(unknown.err().contains("no page store is named 'nosuchstore'"), unknown.err());
            HiCacheCliTest.Run attach = admin(port, "store", "attach", "file", "--set", "file.root=" + second);
            assertEquals(0, attach.status(), attach.err());
            assertTrue(
                    attach.out().startsWith("attached the L3 store 'file' at ")
                            && attach.out().contains("l3-second"),
                    attach.out());
            HiCacheCliTest.Run again = admin(port, "store", "attach", "file", "--set", "file.root=" + first);
            assertEquals(1, again.status(), again.out());
            assertTrue(
                    again.err().contains("attached already") && again.err().contains("detach it first"), again.err());
            assertTrue(admin(port, "store", "show").out().contains("l3-second"));
        } finally {
            server.close();
        }
    }

    @Test
    void aDaemonWithAnAdminTokenTakesAdminCommandsWithItOnly(@TempDir Path dir) throws Exception {
        HiCacheServer server = HiCacheServer.start(ServerConfig.from(Settings.builder()
                .flag("server.bind", "127.0.0.1")
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "none")
                .flag("server.auth-token", TOKEN)
                .flag("server.admin-token", "operator")
                .flag("server.host-size", "64MiB")
                .flag("server.host-dir", dir.resolve("slab").toString())
                .build()));
        try {
            String port = Integer.toString(server.port());
            HiCacheCliTest.Run plain = admin(port, "flush");
            assertEquals(1, plain.status(), plain.out());
            assertTrue(plain.err().contains("server.admin-token"), plain.err());
            assertEquals("L3 store: none\n", admin(port, "store", "show").out(), "SHOW is not an admin operation");
            HiCacheCliTest.Run withToken = admin(port, "flush", "--admin-token", "operator");
            assertEquals(0, withToken.status(), withToken.err());
            assertTrue(withToken.out().contains("dropped 0 pages"), withToken.out());
        } finally {
            server.close();
        }
    }

    @Test
    void badAdminArgumentsExitWith2() {
        for (String[] args : new String[][] {
            {"admin"},
            {"admin", "store"},
            {"admin", "store", "attach"},
            {"admin", "store", "frob"},
            {"admin", "store", "attach", "file", "--set", "no-equals-sign"},
            {"admin", "flush", "--timeout", "soon"}
        }) {
            HiCacheCliTest.Run run = HiCacheCliTest.run(args);
            assertEquals(2, run.status(), String.join(" ", args) + ": " + run.err());
            assertTrue(!run.err().isBlank(), String.join(" ", args) + " says why");
        }
    }

    private static HiCacheCliTest.Run admin(String port, String... args) {
        String[] all = new String[args.length + 5];
        all[0] = "admin";
        System.arraycopy(args, 0, all, 1, args.length);
        System.arraycopy(new String[] {"--port", port, "--auth-token", TOKEN}, 0, all, args.length + 1, 4);
        return HiCacheCliTest.run(all);
    }

    private static void putThreePages(int port) throws Exception {
        Namespace ns = Namespace.of("admin-cli", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        try (Arena arena = Arena.ofShared();
                RemotePageStore client = RemotePageStore.open(RemoteStoreConfig.local(port, TOKEN))) {
            PageBatch.Builder b = PageBatch.builder(3);
            for (int i = 0; i < 3; i++) {
                byte[] hash = new byte[PageHash.BYTES];
                hash[0] = (byte) (i + 1);
                b.add(ns.key(PageHash.fromBytes(hash, 0)), arena.allocate(4096).fill((byte) i));
            }
            assertEquals(
                    3,
                    client.put(b.build(), Deadline.after(Duration.ofSeconds(10)))
                            .get(20, TimeUnit.SECONDS)
                            .count(PageStatus.OK));
        }
    }
}
