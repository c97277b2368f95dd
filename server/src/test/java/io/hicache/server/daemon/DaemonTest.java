package io.hicache.server.daemon;

import static io.hicache.server.daemon.Pages.deadline;
import static io.hicache.server.daemon.Pages.get;
import static io.hicache.server.daemon.Pages.hits;
import static io.hicache.server.daemon.Pages.put;
import static io.hicache.server.daemon.Pages.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.storage.remote.PageLease;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.testkit.PagePattern;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The daemon's tiers, limits and operation, through the Java client and raw sockets on loopback. */
class DaemonTest {
    private static final int KIB = 1024;

    @Test
    void putsAreWrittenBehindEvictedUnderPressureAndPromotedOnGet() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.host-size", "8MiB", "server.max-page-bytes", "1MiB"));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            List<StoreKey> keys = pages.keys(Pages.namespace("tiers"), 64);
            PageBatch sources = pages.filled(keys, 256 * KIB); // 16 MiB: twice the slab
            assertEquals(64, put(client, sources).count(PageStatus.OK));
            assertTrue(
                    d.server.cache.counters.evictedPages.sum() > 0, "16 MiB of puts in an 8 MiB slab evicted nothing");
            awaitWriteBehind(d.server);
            PageStore l3 = d.server.cache.l3.current().orElseThrow();
            assertEquals(64, hits(l3, keys), "every page put reached the L3 store");
            long fromStoreBefore = d.server.cache.counters.storeHits.sum();
            PageBatch targets = pages.empty(keys, 256 * KIB);
            BatchResult got = get(client, targets);
            assertEquals(64, got.count(PageStatus.OK), got::toString);
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(-1, PagePattern.firstMismatch(targets.page(i), keys.get(i), 0), "page " + i);
            }
            assertTrue(d.server.cache.counters.storeHits.sum() > fromStoreBefore, "evicted pages came back from L3");
            assertTrue(d.server.cache.counters.hostHits.sum() > 0, "recent pages were served from the slab");
        }
    }

    @Test
    void aNamespaceQuotaKeepsOneTenantFromCrowdingOutAnother() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of(
                        "server.store",
                        "none",
                        "server.host-size",
                        "16MiB",
                        "server.max-page-bytes",
                        "1MiB",
                        "server.namespace-quota",
                        "2MiB"));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            Namespace quiet = Pages.namespace("quiet");
            Namespace noisy = Pages.namespace("noisy");
            List<StoreKey> quietKeys = pages.keys(quiet, 4);
            assertEquals(4, put(client, pages.filled(quietKeys, 256 * KIB)).count(PageStatus.OK));
            for (int round = 0; round < 8; round++) {
                List<StoreKey> flood = pages.keys(noisy, 8);
                BatchResult r = put(client, pages.filled(flood, 256 * KIB));
                assertEquals(8, r.count(PageStatus.OK), "a tenant at its quota makes room among its own pages: " + r);
                assertTrue(
                        d.server.cache.space.namespaceBytes(noisy) <= 2L << 20,
                        "the noisy tenant holds " + d.server.cache.space.namespaceBytes(noisy)
                                + " bytes, over its 2 MiB quota");
            }
            assertEquals(4, hits(client, quietKeys), "the quiet tenant's pages survived the flood");
        }
    }

    @Test
    void aLeaseReadsPagesInPlaceAndKeepsThemThroughEvictionUntilClosed() throws Exception {
        try (TestDaemon d = TestDaemon.start(
                        Map.of("server.store", "none", "server.host-size", "8MiB", "server.max-page-bytes", "1MiB"));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            Namespace ns = Pages.namespace("lease");
            List<StoreKey> keys = pages.keys(ns, 3);
            assertEquals(3, put(client, pages.filled(keys, 512 * KIB)).count(PageStatus.OK));
            StoreKey absent = pages.keys(ns, 1).getFirst();
            List<StoreKey> asked = List.of(keys.get(0), absent, keys.get(1), keys.get(2));
            PageLease lease = client.lease(asked, 512 * KIB, Duration.ofSeconds(30), deadline())
                    .get(30, TimeUnit.SECONDS);
            assertEquals(
                    List.of(PageStatus.OK, PageStatus.MISS, PageStatus.OK, PageStatus.OK),
                    List.of(lease.status(0), lease.status(1), lease.status(2), lease.status(3)));
            assertThrows(IllegalStateException.class, () -> lease.page(1));
            // Flood the slab four times over: the leased pages must stay where they are, unchanged.
            for (int round = 0; round < 8; round++) {
                put(client, pages.filled(pages.keys(ns, 8), 512 * KIB));
            }
            assertTrue(d.server.cache.counters.evictedPages.sum() > 0, "the flood evicted nothing");
            for (int i : new int[] {0, 2, 3}) {
                assertEquals(-1, PagePattern.firstMismatch(lease.page(i), asked.get(i), 0), "leased page " + i);
            }
            assertEquals(3, stored(client, keys), "leased pages are not evicted");
            lease.close();
            assertThrows(IllegalStateException.class, () -> lease.page(0));
            awaitLeases(d.server, 0);
            for (int round = 0; round < 8; round++) {
                put(client, pages.filled(pages.keys(ns, 8), 512 * KIB));
            }
            assertTrue(stored(client, keys) < 3, "released pages became evictable again");
        }
    }

    @Test
    void theAuthTokenIsCheckedAndRequiredBeyondLoopback() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none", "server.auth-token", "s3cret"));
                Pages pages = new Pages()) {
            HiCacheException refused = assertThrows(
                    HiCacheException.class, () -> RemotePageStore.open(RemoteStoreConfig.local(d.port(), "wrong")));
            assertEquals(ErrorCode.STORE_UNAVAILABLE, refused.code());
            assertTrue(refused.getMessage().contains("wrong auth token"), refused.getMessage());
            try (RawClient raw = new RawClient(d.port())) {
                raw.send(RawClient.frame(Wire.STATS, 7, new byte[0]));
                RawClient.Frame f = raw.read();
                assertTrue(f.isError() && f.errorCode() == Wire.E_AUTH, "a request before HELLO: " + f);
                assertEquals(null, raw.read(), "the connection is closed after an unauthenticated request");
            }
            try (RemotePageStore client = RemotePageStore.open(RemoteStoreConfig.local(d.port(), "s3cret"))) {
                List<StoreKey> keys = pages.keys(Pages.namespace("auth"), 2);
                assertEquals(2, put(client, pages.filled(keys, 4 * KIB)).count(PageStatus.OK));
            }
        }
        Settings open = Settings.builder().flag("server.bind", "0.0.0.0").build();
        HiCacheException noToken = assertThrows(HiCacheException.class, () -> ServerConfig.from(open));
        assertEquals(ErrorCode.CONFIG_INVALID, noToken.code());
        assertTrue(noToken.getMessage().contains("server.auth-token"), noToken.getMessage());
    }

    @Test
    void connectionFrameAndInFlightLimitsHold() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of(
                        "server.store",
                        "none",
                        "server.max-connections",
                        "2",
                        "server.max-page-bytes",
                        "64KiB",
                        "server.max-frame-bytes",
                        "1MiB",
                        "server.max-in-flight-bytes",
                        "1"));
                Pages pages = new Pages()) {
            try (RawClient a = new RawClient(d.port()).hello("");
                    RawClient b = new RawClient(d.port()).hello("");
                    RawClient c = new RawClient(d.port())) {
                RawClient.Frame busy = c.read();
                assertTrue(busy.isError() && busy.errorCode() == Wire.E_BUSY, "a third connection: " + busy);
                assertEquals(null, c.read());
                // A declared length over the limit closes that connection before its bytes are read.
                a.send(ByteBuffer.allocate(4).putInt(0, (1 << 20) + 1).array());
                RawClient.Frame tooLarge = a.read();
                assertTrue(
                        tooLarge.isError() && tooLarge.errorCode() == Wire.E_TOO_LARGE,
                        "an oversized frame: " + tooLarge);
                assertEquals(null, a.read());
                b.send(RawClient.frame(Wire.HEALTH, 9, new byte[0]));
                assertEquals(9, b.read().requestId(), "the other connection is unaffected");
            }
            awaitConnections(d.server, 0);
            // 400 requests pipelined on one connection that may have 1 byte in progress: reading pauses, nothing is
            // lost.
            try (RemotePageStore client =
                    RemotePageStore.open(new RemoteStoreConfig("127.0.0.1", d.port(), "", 1, Duration.ofSeconds(5)))) {
                List<StoreKey> keys = pages.keys(Pages.namespace("pipeline"), 400);
                var puts = keys.stream()
                        .map(k -> client.put(pages.filled(List.of(k), 16 * KIB), deadline()))
                        .toList();
                for (var p : puts) {
                    assertEquals(PageStatus.OK, p.get(30, TimeUnit.SECONDS).status(0));
                }
                assertEquals(400, hits(client, keys));
            }
        }
    }

    @Test
    void aClientThatDoesNotReadItsAnswersPausesOnlyItsOwnConnection() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none", "server.max-in-flight-bytes", "256KiB"));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            Namespace ns = Pages.namespace("slow-reader");
            List<StoreKey> keys = pages.keys(ns, 4);
            assertEquals(4, put(client, pages.filled(keys, 64 * KIB)).count(PageStatus.OK));
            int requests = 400; // 25 MiB of answers against a 256 KiB allowance
            try (RawClient slow = new RawClient(d.port()).hello("")) {
                ByteBuf payload = Unpooled.buffer();
                Codec.writeNamespace(payload, ns);
                payload.writeInt(1);
                Codec.writeHash(payload, keys.get(0).hash());
                payload.writeInt(64 * KIB);
                byte[] get = new byte[payload.readableBytes()];
                payload.readBytes(get);
                for (int i = 0; i < requests; i++) {
                    slow.send(RawClient.frame(Wire.GET, 100 + i, get));
                }
                long deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (d.server.metrics.pausedReads.getLongValue() == 0 && System.nanoTime() < deadlineNanos) {
                    Thread.sleep(5);
                }
                assertTrue(d.server.metrics.pausedReads.getLongValue() > 0, "reading never paused for the slow client");
                assertEquals(4, hits(client, keys), "another connection is served while the slow one is paused");
                for (int i = 0; i < requests; i++) {
                    RawClient.Frame f = slow.read();
                    assertEquals(Wire.GET | Wire.RESPONSE, f.op(), "answer " + i + ": " + f);
                    assertEquals(100 + i, f.requestId(), "answers come in request order");
                    assertEquals(1, f.payload().getInt(0));
                    assertEquals(PageStatus.OK.ordinal(), f.payload().get(4));
                }
            }
        }
    }

    @Test
    void aClearOrDeleteIsNotUndoneByAWriteBehindInFlight() throws Exception {
        // fsync per page keeps the write-behind busy with the pages just put when the clear or delete arrives.
        try (TestDaemon d = TestDaemon.start(Map.of("file.fsync", "true"));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            for (int round = 0; round < 20; round++) {
                Namespace ns = Pages.namespace("race-" + round);
                List<StoreKey> keys = pages.keys(ns, 16);
                assertEquals(16, put(client, pages.filled(keys, 16 * KIB)).count(PageStatus.OK));
                if (round % 2 == 0) {
                    client.clear(ns, deadline()).get(30, TimeUnit.SECONDS);
                } else {
                    client.delete(keys, deadline()).get(30, TimeUnit.SECONDS);
                }
                assertEquals(
                        0,
                        stored(client, keys),
                        "round " + round + ": pages came back after the " + (round % 2 == 0 ? "clear" : "delete"));
            }
        }
    }

    @Test
    void metricsAndHealthAreServedOverHttp() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            List<StoreKey> keys = pages.keys(Pages.namespace("metrics"), 4);
            put(client, pages.filled(keys, 4 * KIB));
            get(client, pages.empty(keys, 4 * KIB));
            HttpClient http = HttpClient.newHttpClient();
            String base = "http://127.0.0.1:" + d.server.metricsPort();
            HttpResponse<String> metrics = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, metrics.statusCode());
            // Read as a scraper would: by name, whatever the number's notation.
            assertEquals(
                    4,
                    ProtocolConformanceTest.metric(metrics.body(), "hicache_server_hits_host_total"),
                    metrics.body());
            assertEquals(
                    1,
                    ProtocolConformanceTest.metric(metrics.body(), "hicache_server_request_seconds_count{op=\"put\"}"),
                    metrics.body());
            for (String name : List.of("hicache_server_connections", "hicache_server_slab_bytes")) {
                assertTrue(ProtocolConformanceTest.metric(metrics.body(), name) > 0, name + " in:\n" + metrics.body());
            }
            // the tier's own I/O counters moved by at least the pages' bytes (issue 40, part 4)
            for (String name : List.of("hicache_server_received_bytes_total", "hicache_server_sent_bytes_total")) {
                assertTrue(
                        ProtocolConformanceTest.metric(metrics.body(), name) >= 4 * 4 * KIB,
                        name + " in:\n" + metrics.body());
            }
            assertEquals(0, ProtocolConformanceTest.metric(metrics.body(), "hicache_server_misses_total"));
            HttpResponse<String> health = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/health")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, health.statusCode());
            assertEquals("ok\n", health.body());
            assertTrue(client.daemonHealthy(deadline()).get(10, TimeUnit.SECONDS));
            assertEquals(
                    4,
                    ProtocolConformanceTest.metric(
                            client.daemonMetrics(deadline()).get(10, TimeUnit.SECONDS), "hicache_server_pages"));
        }
    }

    @Test
    void aGracefulShutdownWritesEveryAcknowledgedPageToL3(@TempDir Path dir) throws Exception {
        Path hostDir = Files.createTempDirectory(
                Path.of("/dev/shm").toFile().isDirectory() ? Path.of("/dev/shm") : dir, "hicache-test-slab-");
        try (Pages pages = new Pages()) {
            List<StoreKey> keys = pages.keys(Pages.namespace("shutdown"), 2000);
            int pending;
            // fsync per page keeps the write-behind well behind the puts.
            TestDaemon d = TestDaemon.start(Map.of("file.fsync", "true"), hostDir, dir);
            try (RemotePageStore client = d.client()) {
                assertEquals(2000, put(client, pages.filled(keys, 16 * KIB)).count(PageStatus.OK));
                pending = d.server.cache.writeBehind.pendingPages();
            }
            d.server.close();
            assertTrue(pending > 0, "the write-behind had caught up before the shutdown: the case checked nothing");
            try (FilePageStore l3 = FilePageStore.open(FileStoreConfig.at(dir.resolve("store")))) {
                PageBatch targets = pages.empty(keys, 16 * KIB);
                BatchResult got = get(l3, targets);
                assertEquals(2000, got.count(PageStatus.OK), got::toString);
                for (int i = 0; i < keys.size(); i++) {
                    assertEquals(-1, PagePattern.firstMismatch(targets.page(i), keys.get(i), 0), "page " + i);
                }
            }
        } finally {
            TestDaemon.delete(hostDir);
        }
    }

    @Test
    void theClientReconnectsToARestartedDaemonWhichStillHasThePages(@TempDir Path dir) throws Exception {
        Path hostDir = Files.createTempDirectory(
                Path.of("/dev/shm").toFile().isDirectory() ? Path.of("/dev/shm") : dir, "hicache-test-slab-");
        try (Pages pages = new Pages()) {
            TestDaemon first = TestDaemon.start(Map.of(), hostDir, dir);
            int port = first.port();
            List<StoreKey> keys = pages.keys(Pages.namespace("restart"), 8);
            try (RemotePageStore client = first.client()) {
                assertEquals(8, put(client, pages.filled(keys, 64 * KIB)).count(PageStatus.OK));
                first.server.close();
                BatchResult whileDown = get(client, pages.empty(keys, 64 * KIB));
                assertEquals(8, whileDown.count(PageStatus.FAILED), whileDown::toString);
                TestDaemon second = TestDaemon.start(Map.of("server.port", Integer.toString(port)), hostDir, dir);
                try {
                    PageBatch targets = pages.empty(keys, 64 * KIB);
                    BatchResult got = get(client, targets);
                    assertEquals(8, got.count(PageStatus.OK), "after the restart, from L3: " + got);
                    assertEquals(-1, PagePattern.firstMismatch(targets.page(7), keys.get(7), 0));
                } finally {
                    second.server.close();
                }
            }
        } finally {
            TestDaemon.delete(hostDir);
        }
    }

    private static void awaitWriteBehind(HiCacheServer server) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (server.cache.writeBehind.pendingPages() > 0 && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        assertEquals(0, server.cache.writeBehind.pendingPages(), "the write-behind did not catch up");
    }

    private static void awaitLeases(HiCacheServer server, int active) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (server.leases.active() != active && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(active, server.leases.active());
    }

    private static void awaitConnections(HiCacheServer server, int open) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (server.metrics.connections.get() != open && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(open, server.metrics.connections.get());
    }
}
