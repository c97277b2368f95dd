package io.hicache.server.daemon;

import static io.hicache.server.daemon.ConformanceTiersTest.delaying;
import static io.hicache.server.daemon.ConformanceTiersTest.restart;
import static io.hicache.server.daemon.ConformanceTiersTest.uniqueName;
import static io.hicache.server.daemon.ConformanceVersion2Test.COMMIT;
import static io.hicache.server.daemon.ConformanceVersion2Test.CRC_32;
import static io.hicache.server.daemon.ConformanceVersion2Test.commit;
import static io.hicache.server.daemon.ConformanceVersion2Test.crc32;
import static io.hicache.server.daemon.ConformanceVersion2Test.reserve;
import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What an independent client, written from docs/protocol.md alone, found the daemon doing otherwise than the document
 * said, or doing where the document said nothing; each case as the document now states it, on the wire.
 */
@Timeout(60)
class ConformanceFindingsTest {
    static final int FLUSH = 0x1C, STORE = 0x1D, E_REFUSED = 10;

    // §3 LEADING_HITS "How many of the pages, from the first, are stored (host slab or L3) without a gap", counted as
    // GET
    // serves them: a chain's first pages only in L3 (evicted, flushed, or put before a restart) and its later ones only
    // in the slab (not yet written behind) is counted whole.
    @Test
    void leadingHitsCountsAChainWhoseFirstPagesAreOnlyInL3AndLaterOnesOnlyInTheSlab() throws Exception {
        String name = uniqueName();
        Ns ns = Ns.fresh();
        List<Page> chain = randomPages(8, 700);
        TestDaemon first = TestDaemon.start(delaying(name, "0ms"));
        try (DocWireClient c = open(first.port())) {
            // pages 0, 1, 4, 5 reach L3 (the first daemon's graceful close writes them behind)
            assertArrayEquals(
                    fill(4, OK), c.put(ns, 0, List.of(chain.get(0), chain.get(1), chain.get(4), chain.get(5))));
        }
        // pages 2, 3, 6, 7 stay in the second daemon's slab: every write-behind to L3 fails
        try (TestDaemon d = restart(
                        first,
                        delaying(name, "0ms", "delaying.failed-puts", "1000000", "server.shutdown-timeout", "1s"));
                DocWireClient c = open(d.port())) {
            assertArrayEquals(
                    fill(4, OK), c.put(ns, 0, List.of(chain.get(2), chain.get(3), chain.get(6), chain.get(7))));
            assertEquals(4, d.server.pendingWriteBehindPages(), "pages 2, 3, 6 and 7 are not in L3");
            // (counted before any GET, which would promote pages 0, 1, 4 and 5 into the slab)
            assertEquals(8, c.leadingHits(ns, 10_000, hashes(chain)));
            Page nowhere = Page.random(700);
            List<Page> gap = new ArrayList<>(chain);
            gap.add(5, nowhere);
            assertEquals(5, c.leadingHits(ns, 10_000, hashes(gap)), "the count ends at the first page no tier has");
            assertEquals(2, c.leadingHits(ns, 10_000, hashes(List.of(chain.get(2), chain.get(4), nowhere))));
            List<PageAnswer> got = c.get(ns, 10_000, chain);
            assertEquals(
                    List.of(OK, OK, OK, OK, OK, OK, OK, OK),
                    got.stream().map(PageAnswer::status).toList(),
                    "GET serves all eight, as LEADING_HITS counted");
            assertEquals(8, c.leadingHits(ns, 10_000, hashes(chain)));
        } finally {
            DelayingPageStore.drop(name);
        }
    }

    // §3 CLEAR, CLEAR_ALL and §1 timeout_ms: a clear answers by its deadline, ERROR TIMED_OUT saying what was done (the
    // slab's pages removed, L3's clear going on in the background), however long L3 takes; a store whose clear blocks
    // its caller (the file store's, over tens of thousands of namespace folders) no longer holds the answer back.
    // Pages put after the answer are kept out of L3 until that clear has ended, and then reach it. A clear asked while
    // one that covers it runs joins it and answers when it ends.
    @Test
    void aClearAllAnswersByItsDeadlineAndClearsL3InTheBackground() throws Exception {
        String own = uniqueName();
        Ns ns = Ns.fresh();
        Ns other = Ns.fresh();
        Page before = Page.random(500);
        Page after = Page.random(500);
        try (TestDaemon d = TestDaemon.start(
                        delaying(own, "0ms", "delaying.clear-delay", "3s", "delaying.blocking-clears", "true"));
                DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, before));
            await(() -> d.server.pendingWriteBehindPages() == 0, "the page written behind");

            c.setReadTimeout(2_000); // L3's clear takes 3 s: an answer that waited for it would not come in time
            String m = c.callError(CLEAR_ALL, 300, new byte[0], E_TIMED_OUT);
            assertTrue(m.contains("partial") && m.contains("background"), m);
            assertEquals(1, d.server.cache.clears.active(), "L3's clear was still running when the answer came");
            c.setReadTimeout(10_000);
            assertEquals(0, c.health(), "the connection's next requests run at once");
            try (DocWireClient c2 = open(d.port())) {
                assertEquals(0, c2.health(), "other connections are served meanwhile");
            }

            assertArrayEquals(new int[] {OK}, c.put(ns, after));
            assertEquals(1, d.server.pendingWriteBehindPages(), "a page put meanwhile waits for the clear");
            // a CLEAR of any namespace joins the CLEAR_ALL running (it covers it) and is answered when it ends
            Frame joined = c.call(CLEAR, 10_000, new Buf().ns(other).done());
            expectOp(joined, CLEAR);
            assertEquals(0, d.server.cache.clears.active());

            await(() -> d.server.pendingWriteBehindPages() == 0, "the page put meanwhile written behind");
            assertEquals(List.of(1L, 0L), flush(c), "FLUSH drops it from the slab: L3 has it");
            assertEquals(
                    OK, c.get(ns, 10_000, List.of(after)).get(0).status(), "the page put after the clear is in L3");
            assertEquals(MISS, c.get(ns, 10_000, List.of(before)).get(0).status(), "the page put before is gone");

        } finally {
            DelayingPageStore.drop(own);
        }
    }

    // §3 CLEAR, CLEAR_ALL: "A clear asked while an earlier one that covers it is queued or running joins it": a second
    // CLEAR_ALL while one runs starts no second L3 clear; it answers TIMED_OUT at its own deadline, or, given time
    // enough, when the first has ended.
    @Test
    void aClearAllWhileOneRunsJoinsIt() throws Exception {
        String own = uniqueName();
        Ns ns = Ns.fresh();
        try (TestDaemon d = TestDaemon.start(
                        delaying(own, "0ms", "delaying.clear-delay", "2s", "delaying.blocking-clears", "true"));
                DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, Page.random(100)));
            c.callError(CLEAR_ALL, 200, new byte[0], E_TIMED_OUT);
            c.callError(CLEAR_ALL, 200, new byte[0], E_TIMED_OUT);
            Frame f = c.call(CLEAR_ALL, 10_000, new byte[0]);
            expectOp(f, CLEAR_ALL);
            assertEquals(0, f.payload().length);
            assertEquals(1, DelayingPageStore.clears(own), "three CLEAR_ALLs, one L3 clear");
            Frame again = c.call(CLEAR_ALL, 10_000, new byte[0]);
            expectOp(again, CLEAR_ALL);
            assertEquals(2, DelayingPageStore.clears(own), "one asked after it ended starts its own");
        } finally {
            DelayingPageStore.drop(own);
        }
    }

    // §2 and §4: admin operations (FLUSH, STORE DETACH and ATTACH, CLEAR_ALL) need server.admin-token when the daemon
    // has one: with the ordinary token they are ERROR AUTH, naming the setting, and the connection stays.
    @Test
    void adminOperationsNeedTheAdminToken() throws Exception {
        try (TestDaemon d =
                TestDaemon.start(Map.of("server.auth-token", "client-token", "server.admin-token", "operator-token"))) {
            Ns ns = Ns.fresh();
            Page p = Page.random(200);
            try (DocWireClient c = connect(d.port())) {
                c.hello("client-token");
                assertArrayEquals(new int[] {OK}, c.put(ns, p));
                for (byte[][] request : List.of(
                        new byte[][] {{(byte) FLUSH}, {}},
                        new byte[][] {{(byte) CLEAR_ALL}, {}},
                        new byte[][] {{(byte) STORE}, {1}},
                        new byte[][] {
                            {(byte) STORE}, new Buf().u8(2).str("file").u32(0).done()
                        })) {
                    String m = c.callError(request[0][0] & 0xFF, 0, request[1], E_AUTH);
                    assertTrue(m.contains("server.admin-token"), m);
                    assertEquals(0, c.health(), "the connection stays");
                }
                Frame show = c.call(STORE, 0, new byte[] {0});
                expectOp(show, STORE);
                assertEquals(1, show.reader().u8(), "STORE SHOW is not an admin operation");
                assertEquals(OK, c.get(ns, p).get(0).status(), "nothing was flushed or cleared");
                expectOp(c.call(CLEAR, 0, new Buf().ns(Ns.fresh()).done()), CLEAR);
            }
            try (DocWireClient admin = connect(d.port())) {
                admin.hello("operator-token");
                assertEquals(OK, admin.get(ns, p).get(0).status(), "the admin token does everything else too");
                assertEquals(2, flush(admin).size());
                expectOp(admin.call(CLEAR_ALL, 10_000, new byte[0]), CLEAR_ALL);
                assertEquals(MISS, admin.get(ns, p).get(0).status());
            }
            try (DocWireClient c = connect(d.port())) {
                long id = nextId();
                c.write(frame(HELLO, id, 0, helloPayload("nobody's token")));
                c.expectError(E_AUTH, id);
                c.expectClosed();
            }
        }
        assertThrows(
                RuntimeException.class,
                () -> TestDaemon.start(Map.of("server.auth-token", "same", "server.admin-token", "same"))
                        .close(),
                "an admin token equal to the auth token is refused");
    }

    // §2: without server.admin-token, admin operations are accepted from loopback peers only (the daemon's tests all
    // connect over loopback, where they pass; another address is refused)
    @Test
    void withoutAnAdminTokenOnlyLoopbackPeersAdminister() {
        assertTrue(HandshakeHandler.mayAdminister(false, false, new InetSocketAddress("127.0.0.1", 4000)));
        assertTrue(HandshakeHandler.mayAdminister(false, false, new InetSocketAddress("::1", 4000)));
        assertFalse(HandshakeHandler.mayAdminister(false, false, new InetSocketAddress("10.1.2.3", 4000)));
        assertFalse(HandshakeHandler.mayAdminister(false, false, new InetSocketAddress("192.168.7.9", 4000)));
        assertFalse(
                HandshakeHandler.mayAdminister(false, true, new InetSocketAddress("127.0.0.1", 4000)),
                "with an admin token, loopback is no exception");
        assertTrue(HandshakeHandler.mayAdminister(true, true, new InetSocketAddress("10.1.2.3", 4000)));
    }

    // §3 STORE ATTACH: refused (ERROR REFUSED, nothing made) for a key that is not one of the store's settings (naming
    // the nearest), a folder outside server.store-root (after resolving .. and symbolic links), and a remote store
    // that is the daemon itself; a folder under the root is attached.
    @Test
    void attachRefusesUnknownKeysFoldersOutsideTheRootAndItself() throws Exception {
        Path outside = Files.createTempDirectory("hicache-test-outside-");
        try (TestDaemon d = TestDaemon.start(Map.of());
                DocWireClient c = open(d.port())) {
            Path root = d.fileRoot; // the default root: the folder holding file.root (fileRoot/store)
            c.call(STORE, 10_000, new byte[] {1}); // detach

            String m = attachRefused(
                    c, "file", Map.of("file.rooot", root.resolve("x").toString()));
            assertTrue(m.contains("file.rooot") && m.contains("did you mean 'file.root'"), m);
            assertFalse(Files.exists(root.resolve("x")));

            Path there = outside.resolve("made-by-attach");
            m = attachRefused(c, "file", Map.of("file.root", there.toString()));
            assertTrue(
                    m.contains("outside server.store-root")
                            && m.contains(root.toRealPath().toString()),
                    m);
            assertFalse(Files.exists(there), "nothing was made");
            m = attachRefused(c, "file", Map.of("file.root", root + "/a/../../" + outside.getFileName() + "/x"));
            assertTrue(m.contains("outside server.store-root"), m);
            Files.createSymbolicLink(root.resolve("link"), outside);
            m = attachRefused(
                    c,
                    "file",
                    Map.of("file.root", root.resolve("link").resolve("x").toString()));
            assertTrue(m.contains("outside server.store-root"), m);
            assertFalse(Files.exists(outside.resolve("x")), "nothing was made through the link");

            for (String host : List.of("127.0.0.1", "localhost")) {
                m = attachRefused(c, "remote", Map.of("remote.host", host, "remote.port", Integer.toString(d.port())));
                assertTrue(m.contains("is this daemon"), m);
            }

            Frame f = c.call(
                    STORE,
                    30_000,
                    attachPayload(
                            "file", Map.of("file.root", root.resolve("second").toString())));
            expectOp(f, STORE);
            assertEquals(1, f.reader().u8(), "a folder under the root is attached");
            assertTrue(Files.isDirectory(root.resolve("second")));
        } finally {
            TestDaemon.delete(outside);
        }
    }

    // §3 STORE ATTACH of a remote store on another daemon of the same host is not "itself"
    @Test
    void aRemoteStoreOnAnotherDaemonIsAttached() throws Exception {
        try (TestDaemon l3 = TestDaemon.start(Map.of("server.store", "none"));
                TestDaemon d = TestDaemon.start(Map.of());
                DocWireClient c = open(d.port())) {
            c.call(STORE, 10_000, new byte[] {1});
            Frame f =
                    c.call(STORE, 30_000, attachPayload("remote", Map.of("remote.port", Integer.toString(l3.port()))));
            expectOp(f, STORE);
            assertEquals(1, f.reader().u8(), f.toString());
        }
    }

    static byte[] attachPayload(String name, Map<String, String> settings) {
        Buf b = new Buf().u8(2).str(name).u32(settings.size());
        settings.forEach((k, v) -> b.str(k).str(v));
        return b.done();
    }

    static String attachRefused(DocWireClient c, String name, Map<String, String> settings) throws IOException {
        return c.callError(STORE, 30_000, attachPayload(name, settings), E_REFUSED);
    }

    // §3 LEASE, RESERVE: a connection holds at most server.max-leases-per-connection leases and reservations; past it
    // a LEASE or RESERVE takes nothing, answers id 0 and its pages REJECTED (GET or PUT them instead). Ending one frees
    // its slot; other connections have their own.
    @Test
    void leasesPerConnectionAreBounded() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none", "server.max-leases-per-connection", "2"));
                DocWireClient c = open2(d.port(), CRC_32);
                DocWireClient other = open(d.port())) {
            Ns ns = Ns.fresh();
            Page p = Page.random(3000);
            assertArrayEquals(new int[] {OK}, other.put(ns, p));
            LeaseAnswer first = c.lease(ns, 0, List.of(p), 30_000);
            LeaseAnswer second = c.lease(ns, 0, List.of(p), 30_000);
            assertEquals(OK, first.pages().get(0).status());
            assertEquals(OK, second.pages().get(0).status());
            LeaseAnswer over = c.lease(ns, 0, List.of(p), 30_000);
            assertEquals(0, over.leaseId(), "no lease: id 0");
            PageAnswer a = over.pages().get(0);
            assertEquals(REJECTED, a.status());
            assertEquals(NO_OFFSET, a.offset());
            assertEquals(3000, a.length(), "REJECTED carries the stored page's length");
            assertEquals(crc32(p.body()), a.crc(), "and its checksum (the connection's: CRC-32 here)");
            assertEquals(0, c.release(0), "id 0 names no lease");
            ConformanceVersion2Test.Reservation r = reserve(c, ns, List.of(Page.random(100)), 10_000);
            assertEquals(0, r.id());
            assertArrayEquals(new int[] {REJECTED}, r.statuses());
            assertEquals(OK, c.get(ns, p).get(0).status(), "GET serves what LEASE did not");
            assertEquals(
                    OK, other.lease(ns, 0, List.of(p), 30_000).pages().get(0).status(), "another connection's own");

            assertEquals(1, c.release(first.leaseId()));
            LeaseAnswer again = c.lease(ns, 0, List.of(p), 30_000);
            assertEquals(OK, again.pages().get(0).status(), "a released lease frees its slot");
            assertNotEquals(0, again.leaseId());
        }
    }

    /** A version 2 connection with {@code checksum}. */
    static DocWireClient open2(int port, int checksum) throws IOException {
        DocWireClient c = connect(port);
        Frame f = c.call(
                HELLO, 0, new Buf().u32(MAGIC).u16(2).str("").u8(checksum).done());
        expectOp(f, HELLO);
        return c;
    }

    // §2 "The token is a string, so at most 2,048 bytes: a longer one makes the HELLO frame too large (ERROR
    // TOO_LARGE)": also a version 1 HELLO, which without version 2's checksum byte still fits the pre-HELLO limit
    @Test
    void aVersion1HelloWithATokenOver2048BytesIsTooLarge() throws IOException {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                DocWireClient c = connect(d.port())) {
            byte[] token = new byte[2049];
            Arrays.fill(token, (byte) 't');
            long id = nextId();
            byte[] hello = frame(HELLO, id, 0, helloPayload(MAGIC, VERSION, token));
            assertEquals(2077, hello.length, "not over the pre-HELLO frame limit");
            c.write(hello);
            c.expectError(E_TOO_LARGE, id);
            c.expectClosed();
        }
    }

    // §2 "a daemon without a token refuses a HELLO that carries one": ERROR AUTH, and the connection closes
    @Test
    void aTokenSentToADaemonWithoutOneIsAuth() throws IOException {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                DocWireClient c = connect(d.port())) {
            long id = nextId();
            c.write(frame(HELLO, id, 0, helloPayload("a token")));
            Frame f = c.expectError(E_AUTH, id);
            assertTrue(f.errorMessage().contains("no auth token"), f.toString());
            c.expectClosed();
        }
    }

    // §3 GET, LEASE: "length and crc32c are the stored page's for OK, SIZE_MISMATCH and REJECTED (LEASE), 0 otherwise",
    // in the connection's checksum; a version 2 LEASE with flag 0x01 carries 0 for every crc32c
    @Test
    void aSizeMismatchCarriesTheStoredPagesLengthAndChecksum() throws IOException {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                DocWireClient v1 = open(d.port());
                DocWireClient v2 = open2(d.port(), CRC_32)) {
            Ns ns = Ns.fresh();
            Page p = Page.random(1000);
            Page asked = new Page(p.hash(), new byte[999]);
            assertArrayEquals(new int[] {OK}, v1.put(ns, p));

            PageAnswer got = v1.get(ns, asked).get(0);
            assertEquals(List.of(SIZE_MISMATCH, 1000L, p.crc()), List.of(got.status(), got.length(), got.crc()));
            PageAnswer leased = v1.lease(ns, 0, List.of(asked), 1000).pages().get(0);
            assertEquals(
                    List.of(SIZE_MISMATCH, 1000L, p.crc(), NO_OFFSET),
                    List.of(leased.status(), leased.length(), leased.crc(), leased.offset()));
            PageAnswer leased32 = v2.lease(ns, 0, List.of(asked), 1000).pages().get(0);
            assertEquals(
                    List.of(SIZE_MISMATCH, 1000L, crc32(p.body())),
                    List.of(leased32.status(), leased32.length(), leased32.crc()));
            long id = nextId();
            v2.write(frame(LEASE, 0x01, 0, id, 0, leasePayload(ns, List.of(asked), 1000)));
            Frame f = v2.read();
            assertEquals(id, f.id());
            PageAnswer noSums = leaseAnswer(f).pages().get(0);
            assertEquals(
                    List.of(SIZE_MISMATCH, 1000L, 0),
                    List.of(noSums.status(), noSums.length(), noSums.crc()),
                    "flag 0x01: no checksums");
        }
    }

    // §3 PUT: the same hash twice in one PUT is one page: OK for the first, EXISTS for the second (its body is not
    // stored); RESERVE likewise gives each its own room, and COMMIT answers the second EXISTS
    @Test
    void theSameHashTwiceInOnePutIsOkThenExists() throws IOException {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                DocWireClient c = open(d.port())) {
            Ns ns = Ns.fresh();
            Page p = Page.random(400);
            Page twin = new Page(p.hash(), Page.random(400).body());
            assertArrayEquals(new int[] {OK, EXISTS}, c.put(ns, p, twin));
            assertArrayEquals(p.body(), c.get(ns, p).get(0).body(), "the first one's body is stored");

            Page q = Page.random(300);
            try (DocWireClient v2 = open2(d.port(), CRC_32);
                    FileChannel file = FileChannel.open(
                            d.server.cache.space.file(), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                MappedByteBuffer slab = file.map(FileChannel.MapMode.READ_WRITE, 0, file.size());
                ConformanceVersion2Test.Reservation r = reserve(v2, ns, List.of(q, q), 10_000);
                assertArrayEquals(new int[] {OK, OK}, r.statuses(), "each gets its own room");
                assertNotEquals(r.offsets()[0], r.offsets()[1]);
                slab.put((int) r.offsets()[0], q.body());
                slab.put((int) r.offsets()[1], q.body());
                assertArrayEquals(new int[] {OK, EXISTS}, commit(v2, r.id(), new int[] {crc32(q.body()), crc32(q.body())
                }));
            }
            assertArrayEquals(q.body(), c.get(ns, q).get(0).body());
        }
    }

    // §3: a request of 0 pages is accepted and answered with 0 entries: GET, PUT, DELETE, LEADING_HITS; RESERVE hands
    // out a reservation of no pages (an id, held like any other until committed, released or expired), which COMMIT of
    // 0 checksums ends
    @Test
    void requestsOfZeroPagesAreAnsweredWithZeroEntries() throws IOException {
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none"));
                DocWireClient c = open2(d.port(), CRC_32)) {
            Ns ns = Ns.fresh();
            assertEquals(0, c.get(ns, 0, List.of()).size());
            assertArrayEquals(new int[0], c.put(ns, 0, List.of()));
            assertArrayEquals(new int[0], c.delete(ns, 0, List.of()));
            assertEquals(0, c.leadingHits(ns, 0, List.of()));
            ConformanceVersion2Test.Reservation r = reserve(c, ns, List.of(), 10_000);
            assertNotEquals(0, r.id());
            assertEquals(0, r.statuses().length);
            assertArrayEquals(new int[0], commit(c, r.id(), new int[0]));
            c.callError(COMMIT, 0, new Buf().u64(r.id()).u32(0).done(), E_MALFORMED);
        }
    }

    /** FLUSH: dropped and kept. */
    static List<Long> flush(DocWireClient c) throws IOException {
        Frame f = c.call(FLUSH, 10_000, new byte[0]);
        expectOp(f, FLUSH);
        Reader r = f.reader();
        List<Long> out = List.of(r.u64(), r.u64());
        r.end();
        return out;
    }

    static void await(BooleanSupplier done, String what) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out waiting for " + what);
            Thread.sleep(10);
        }
    }
}
