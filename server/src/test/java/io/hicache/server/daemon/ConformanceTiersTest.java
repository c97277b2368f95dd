package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static io.hicache.server.daemon.ProtocolConformanceTest.readSlab;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * docs/protocol.md on the two tiers: pages only in L3 (§3 GET, LEASE), no L3, quotas and a full slab (§3 PUT, §7), on
 * the wire. A page is put "only in L3" by a first daemon whose graceful close writes it behind, then served by a
 * second daemon over the same store; the {@code delaying} store tells a page in the host slab (answered at once) from
 * one in L3 (answered late).
 */
@Timeout(30)
class ConformanceTiersTest {
    /** Settings of a daemon over the shared {@code delaying} store {@code name}, late by {@code delay}. */
    static Map<String, String> delaying(String name, String delay, String... more) {
        Map<String, String> s =
                new HashMap<>(Map.of("server.store", "delaying", "delaying.shared", name, "delaying.delay", delay));
        for (int i = 0; i < more.length; i += 2) {
            s.put(more[i], more[i + 1]);
        }
        return s;
    }

    /** Closes {@code first}'s server (gracefully: its pages are written behind) and starts a daemon on its L3. */
    static TestDaemon restart(TestDaemon first, Map<String, String> settings) throws IOException {
        first.server.close();
        TestDaemon.delete(first.hostDir);
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-test-slab-");
        return TestDaemon.start(settings, hostDir, first.fileRoot);
    }

    static String uniqueName() {
        return "conformance-" + System.nanoTime();
    }

    /** Pages only in L3, served by a daemon whose L3 answers 700 ms late. */
    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class OnlyInL3 {
        final String name = uniqueName();
        final Ns ns = Ns.fresh();
        final List<Page> forGet = randomPages(3, 3000);
        final List<Page> forLease = randomPages(2, 5000);
        final List<Page> forHits = randomPages(4, 100);
        final List<Page> forDelete = randomPages(2, 100);
        TestDaemon d;
        HelloAnswer hello;

        @BeforeAll
        void start() throws IOException {
            TestDaemon first = TestDaemon.start(delaying(name, "0ms"));
            try (DocWireClient c = open(first.port())) {
                for (List<Page> pages : List.of(forGet, forLease, forHits, forDelete)) {
                    assertArrayEquals(fill(pages.size(), OK), c.put(ns, 0, pages));
                }
            }
            d = restart(first, delaying(name, "700ms"));
            try (DocWireClient c = connect(d.port())) {
                hello = c.hello("");
            }
        }

        @AfterAll
        void stop() throws IOException {
            d.close();
            DelayingPageStore.drop(name);
        }

        // §3 GET "A page found only in L3 is read, served and promoted into the host slab." §1 "Pages in the host slab
        // are always answered, however late."
        @Test
        void getServesAPageOnlyInL3AndPromotesIt() throws Exception {
            try (DocWireClient c = open(d.port())) {
                List<PageAnswer> got = c.get(ns, 10_000, forGet);
                for (int i = 0; i < forGet.size(); i++) {
                    assertEquals(OK, got.get(i).status());
                    assertEquals(forGet.get(i).crc(), got.get(i).crc());
                    assertArrayEquals(forGet.get(i).body(), got.get(i).body());
                }
                Thread.sleep(100);
                List<PageAnswer> again = c.get(ns, 200, forGet); // L3 would answer after 700 ms: from the slab
                assertEquals(
                        List.of(OK, OK, OK),
                        again.stream().map(PageAnswer::status).toList(),
                        "promoted");
            }
        }

        // §3 LEASE "A page only in L3 is read into the slab (promoted) and leased like the others (OK)."
        @Test
        void leaseOfAPageOnlyInL3IsOk() throws IOException {
            try (DocWireClient c = open(d.port())) {
                LeaseAnswer l = c.lease(ns, 10_000, forLease, 30_000);
                for (int i = 0; i < forLease.size(); i++) {
                    PageAnswer pa = l.pages().get(i);
                    assertEquals(OK, pa.status());
                    assertArrayEquals(
                            forLease.get(i).body(), readSlab(hello.slabPath(), pa.offset(), (int) pa.length()));
                }
                assertEquals(1, c.release(l.leaseId()));
            }
        }

        // §3 LEADING_HITS "stored (host slab or L3)"; §1 timeout_ms "0 means 30 s" (not "no time": L3 answers late)
        @Test
        void leadingHitsCountsPagesOnlyInL3() throws IOException {
            try (DocWireClient c = open(d.port())) {
                List<Page> withGap = new ArrayList<>(forHits);
                withGap.add(2, Page.random(100));
                assertEquals(2, c.leadingHits(ns, 0, hashes(withGap)));
                assertEquals(4, c.leadingHits(ns, 0, hashes(forHits)));
            }
        }

        // §3 DELETE "Removes the pages from the host slab and from L3." (OK: "removed from every tier")
        @Test
        void deleteRemovesAPageOnlyInL3() throws IOException {
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(new int[] {OK, OK}, c.delete(ns, 10_000, hashes(forDelete)));
                assertEquals(0, c.leadingHits(ns, 10_000, hashes(forDelete)));
                assertEquals(MISS, c.get(ns, 10_000, forDelete).get(1).status());
            }
        }
    }

    // §1 page statuses "CORRUPT stored bytes failed their checksum; not delivered"; §1 GET/LEASE "a damaged L3 page is
    // CORRUPT"
    @Test
    void aDamagedL3PageIsCorruptAndNotDelivered() throws Exception {
        Ns ns = Ns.of("corrupt-" + System.nanoTime());
        Page p = Page.random(4096);
        Page q = Page.random(4096);
        Page fine = Page.random(4096);
        TestDaemon first = TestDaemon.start(Map.of());
        try (DocWireClient c = open(first.port())) {
            assertArrayEquals(new int[] {OK, OK, OK}, c.put(ns, p, q, fine));
        }
        try (TestDaemon d = restart(first, Map.of());
                DocWireClient c = open(d.port())) {
            Namespace core = Namespace.of(
                    new String(ns.model(), StandardCharsets.UTF_8), KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
            d.corrupter().corrupt(null, core.key(PageHash.fromBytes(p.hash(), 0)));
            d.corrupter().corrupt(null, core.key(PageHash.fromBytes(q.hash(), 0)));
            List<PageAnswer> got = c.get(ns, 0, List.of(p, fine));
            assertEquals(CORRUPT, got.get(0).status(), "a damaged L3 page");
            assertNull(got.get(0).body());
            assertArrayEquals(fine.body(), got.get(1).body());
            // §1 "it may then be dropped from L3": asked again, a MISS is as true as CORRUPT
            int again = c.get(ns, 0, List.of(p)).get(0).status();
            assertTrue(again == CORRUPT || again == MISS, "asked again: " + again);
            LeaseAnswer l = c.lease(ns, 0, List.of(q), 1000); // a second damaged page, for LEASE
            assertEquals(CORRUPT, l.pages().get(0).status());
            assertEquals(NO_OFFSET, l.pages().get(0).offset());
        }
    }

    // §3 LEASE "A page only in L3 that the slab had no room for ... is REJECTED for a lease; GET it instead."; §7 "A
    // page is leased that only L3 has ... unless the slab has no room for it: then REJECTED (GET it instead)."
    @Test
    void leaseOfAnL3PageWithNoRoomInTheSlabIsRejected() throws Exception {
        String name = uniqueName();
        Ns ns = Ns.fresh();
        Page inL3 = Page.random(16_000);
        TestDaemon first = TestDaemon.start(delaying(name, "0ms"));
        try (DocWireClient c = open(first.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, inL3));
        }
        try (TestDaemon d = restart(
                        first,
                        delaying(
                                name,
                                "0ms",
                                "server.host-size",
                                "64KiB",
                                "server.max-page-bytes",
                                "16KiB",
                                "server.max-frame-bytes",
                                "128KiB"));
                DocWireClient c = open(d.port())) {
            int leased = fillWithLeasedPages(c, ns, 16_000, 10);
            assertTrue(leased >= 1 && leased <= 4, leased + " leased pages of 16,000 bytes in a 64 KiB slab");
            LeaseAnswer l = c.lease(ns, 5000, List.of(inL3), 30_000);
            assertEquals(REJECTED, l.pages().get(0).status());
            assertEquals(NO_OFFSET, l.pages().get(0).offset());
            PageAnswer got = c.get(ns, 5000, List.of(inL3)).get(0);
            assertEquals(OK, got.status(), "GET it instead");
            assertArrayEquals(inL3.body(), got.body());
        } finally {
            DelayingPageStore.drop(name);
        }
    }

    /** Puts and leases pages one by one until a put is refused; returns how many were leased. */
    static int fillWithLeasedPages(DocWireClient c, Ns ns, int length, int atMost) throws IOException {
        for (int i = 0; i < atMost; i++) {
            Page p = Page.random(length);
            int s = c.put(ns, 1000, List.of(p))[0];
            if (s != OK) {
                assertTrue(s == REJECTED || s == TIMED_OUT, "a put that finds no room is REJECTED or TIMED_OUT: " + s);
                return i;
            }
            assertEquals(
                    OK, c.lease(ns, 1000, List.of(p), 30_000).pages().get(0).status());
        }
        throw new AssertionError(atMost + " leased pages and the slab is still not full");
    }

    /** A daemon without L3 and a 64 KiB slab, fresh for each test. */
    @Nested
    class WithoutL3 {
        static final int PAGE = 16_000; // one 16 KiB block: four fill the slab

        TestDaemon start(String store) throws IOException {
            return TestDaemon.start(Map.of(
                    "server.store",
                    store,
                    "server.host-size",
                    "64KiB",
                    "server.max-page-bytes",
                    "16KiB",
                    "server.max-frame-bytes",
                    "128KiB"));
        }

        // §3 PUT "When the slab is full, the least recently used pages ... (and, with no L3, dropped)"; §7 "with no L3
        // the daemon is a cache, and an OK page is one that was in the slab when answered"
        @Test
        void aFullSlabDropsItsLeastRecentlyUsedPages() throws IOException {
            for (String none : List.of("none", "")) {
                try (TestDaemon d = start(none);
                        DocWireClient c = open(d.port())) {
                    Ns ns = Ns.fresh();
                    List<Page> pages = randomPages(10, PAGE);
                    for (Page p : pages) {
                        assertArrayEquals(new int[] {OK}, c.put(ns, p), "server.store=" + none);
                        assertEquals(OK, c.get(ns, p).get(0).status(), "an OK page is in the slab");
                    }
                    List<Integer> st =
                            c.get(ns, 0, pages).stream().map(PageAnswer::status).toList();
                    assertEquals(MISS, st.get(0), "the oldest page was dropped: " + st);
                    assertTrue(st.stream().filter(s -> s == OK).count() <= 4, "a 64 KiB slab: " + st);
                    assertEquals(0, c.health());
                    assertTrue(c.stats().contains("# TYPE"));
                }
            }
        }

        // §3 PUT "Pages of the same PUT never evict each other: a page that finds no room is REJECTED (or TIMED_OUT at
        // the deadline), and every OK page is in the slab when the answer is sent."
        @Test
        void pagesOfOnePutNeverEvictEachOther() throws IOException {
            try (TestDaemon d = start("none");
                    DocWireClient c = open(d.port())) {
                Ns ns = Ns.fresh();
                List<Page> pages = randomPages(6, PAGE);
                int[] st = c.put(ns, 2000, pages);
                checkOkPagesAreInTheSlab(c, ns, pages, st, 4);
            }
        }

        // §7 "Leased, in-use and not-yet-written pages are never evicted ... A page that still finds no room is
        // REJECTED."; §3 LEASE "The daemon neither evicts nor overwrites a leased page until the lease is released"
        @Test
        void aSlabFullOfLeasedPagesRefusesPutsAndKeepsTheLeasedBytes() throws IOException {
            try (TestDaemon d = start("none");
                    DocWireClient c = connect(d.port())) {
                HelloAnswer hello = c.hello("");
                Ns ns = Ns.fresh();
                List<Page> leased = randomPages(2, PAGE);
                assertArrayEquals(new int[] {OK, OK}, c.put(ns, 0, leased));
                LeaseAnswer l = c.lease(ns, 0, leased, 30_000);
                List<Page> more = randomPages(4, PAGE);
                int[] st = c.put(ns, 2000, more);
                checkOkPagesAreInTheSlab(c, ns, more, st, 2);
                for (int i = 0; i < 4; i++) {
                    c.put(ns, 500, List.of(Page.random(PAGE)));
                }
                for (int i = 0; i < leased.size(); i++) {
                    PageAnswer pa = l.pages().get(i);
                    assertArrayEquals(
                            leased.get(i).body(),
                            readSlab(hello.slabPath(), pa.offset(), PAGE),
                            "a leased page's bytes were overwritten");
                    assertEquals(OK, c.get(ns, leased.get(i)).get(0).status(), "a leased page was evicted");
                }
                assertEquals(1, c.release(l.leaseId()));
            }
        }
    }

    /**
     * A daemon with {@code server.namespace-quota} 64 KiB (four pages of 16,000 bytes) in a 1 MiB slab, over an L3
     * that answers reads 1 s late: a GET with a 300 ms deadline answers OK for pages in the slab, TIMED_OUT for the
     * others.
     */
    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class Quota {
        static final int PAGE = 16_000;
        final String name = uniqueName();
        TestDaemon d;

        @BeforeAll
        void start() throws IOException {
            d = TestDaemon.start(delaying(
                    name,
                    "1000ms",
                    "server.namespace-quota",
                    "64KiB",
                    "server.host-size",
                    "1MiB",
                    "server.max-page-bytes",
                    "16KiB",
                    "server.max-frame-bytes",
                    "128KiB"));
        }

        @AfterAll
        void stop() throws IOException {
            d.close();
            DelayingPageStore.drop(name);
        }

        // §1 "A namespace's quota (server.namespace-quota ...) bounds its bytes in the host slab ..., not in L3"; §7 "A
        // PUT
        // over the quota evicts that namespace's own least recently used pages that L3 already has (they stay in L3 and
        // come back on a GET ...), never another namespace's"
        @Test
        void aPutOverTheQuotaEvictsItsOwnNamespacesPagesOnly() throws IOException {
            Ns a = Ns.fresh();
            Ns b = Ns.fresh();
            List<Page> bs = randomPages(2, PAGE);
            List<Page> as = randomPages(8, PAGE);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(new int[] {OK, OK}, c.put(b, 0, bs));
                for (Page p : as) {
                    assertArrayEquals(new int[] {OK}, c.put(a, 5000, List.of(p)), "room is made from A's own pages");
                }
                List<Integer> bNow =
                        c.get(b, 300, bs).stream().map(PageAnswer::status).toList();
                assertEquals(List.of(OK, OK), bNow, "another namespace's pages stay in the slab");
                List<Integer> aNow =
                        c.get(a, 300, as).stream().map(PageAnswer::status).toList();
                assertTrue(aNow.stream().allMatch(s -> s == OK || s == TIMED_OUT), "statuses " + aNow);
                long inSlab = aNow.stream().filter(s -> s == OK).count();
                assertTrue(inSlab <= 4 && inSlab >= 1, "the quota holds four pages; in the slab: " + aNow);
                List<PageAnswer> back = c.get(a, 10_000, as);
                for (int i = 0; i < as.size(); i++) {
                    assertArrayEquals(as.get(i).body(), back.get(i).body(), "evicted pages come back from L3");
                }
            }
        }

        // §7 "[a PUT over the quota evicts] never one in use ... and never a page of the same PUT. If that cannot make
        // room by the deadline the page is REJECTED (TIMED_OUT once the deadline has passed)"
        @Test
        void aQuotaFullOfLeasedPagesRefusesPutsOfThatNamespaceOnly() throws IOException {
            Ns e = Ns.fresh();
            try (DocWireClient c = open(d.port())) {
                int leased = fillWithLeasedPages(c, e, PAGE, 8);
                assertTrue(leased >= 1 && leased <= 4, leased + " leased pages under a quota of four");
                assertArrayEquals(new int[] {OK}, c.put(Ns.fresh(), Page.random(PAGE)), "another namespace has room");
            }
        }

        // §3 PUT "With L3 a page is evictable only once L3 has it, so an OK page is in one tier or the other"; §7 quota
        @Test
        void onePutOverTheQuotaLeavesEveryOkPageInSomeTier() throws IOException {
            Ns f = Ns.fresh();
            List<Page> pages = randomPages(6, PAGE);
            try (DocWireClient c = open(d.port())) {
                int[] st = c.put(f, 3000, pages);
                // §3 PUT "With L3 a page is evictable only once L3 has it, so an OK page is in one tier or the other"
                List<PageAnswer> got = c.get(f, 5000, pages);
                List<Integer> notThere = new ArrayList<>();
                int ok = 0;
                for (int i = 0; i < st.length; i++) {
                    assertTrue(st[i] == OK || st[i] == REJECTED || st[i] == TIMED_OUT, "status " + st[i]);
                    if (st[i] == OK) {
                        ok++;
                        if (got.get(i).status() != OK) {
                            notThere.add(i);
                        }
                    }
                }
                assertEquals(
                        List.of(),
                        notThere,
                        "pages answered OK (" + Arrays.toString(st) + ") but in no tier after the PUT");
                assertTrue(ok >= 4, "a quota of four pages, and L3 to make room in: " + Arrays.toString(st));
            }
        }
    }

    // §3 LEASE "The daemon neither evicts nor overwrites a leased page until the lease is released, its connection
    // closes, or hold_ms passes" (once the holder's connection closes, the slab full of its leased pages makes room)
    @Test
    void closingTheHoldersConnectionEndsItsLeases() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of(
                "server.store",
                "none",
                "server.host-size",
                "64KiB",
                "server.max-page-bytes",
                "16KiB",
                "server.max-frame-bytes",
                "128KiB"))) {
            Ns ns = Ns.fresh();
            try (DocWireClient holder = open(d.port())) {
                fillWithLeasedPages(holder, ns, 16_000, 10);
            }
            try (DocWireClient c = open(d.port())) {
                int s = -1;
                for (int tries = 0; tries < 20 && s != OK; tries++) { // the daemon notices the close soon
                    s = c.put(ns, 1000, List.of(Page.random(16_000)))[0];
                    if (s != OK) {
                        Thread.sleep(50);
                    }
                }
                assertEquals(OK, s, "the leases of a closed connection still hold the slab");
            }
        }
    }

    /** Fails unless every OK page of a PUT answered {@code st} is in the slab, and at most {@code room} are OK. */
    static void checkOkPagesAreInTheSlab(DocWireClient c, Ns ns, List<Page> pages, int[] st, int room)
            throws IOException {
        List<PageAnswer> got = c.get(ns, 0, pages);
        List<Integer> notThere = new ArrayList<>();
        int ok = 0;
        for (int i = 0; i < pages.size(); i++) {
            assertTrue(st[i] == OK || st[i] == REJECTED || st[i] == TIMED_OUT, "status " + st[i]);
            if (st[i] == OK) {
                ok++;
                if (got.get(i).status() != OK) {
                    notThere.add(i);
                }
            }
        }
        assertEquals(
                List.of(),
                notThere,
                "pages answered OK (" + Arrays.toString(st) + ") but not in the slab when the answer came");
        assertTrue(ok <= room, ok + " pages OK, room for " + room + ": " + Arrays.toString(st));
        assertTrue(ok < pages.size(), "room for " + room + " pages, all " + pages.size() + " answered OK");
    }
}
