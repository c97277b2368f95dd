package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
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
 * docs/protocol.md §3 (every request's layout and statuses) and §1 (ordering of pipelined writes), on the wire with {@link DocWireClient}, against one daemon with the file store as L3.
 */
@Timeout(30)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ProtocolConformanceTest {
    static final int MAX_PAGE = 64 * 1024;

    TestDaemon d;
    HelloAnswer hello;

    @BeforeAll
    void start() throws IOException {
        d = TestDaemon.start(Map.of("server.max-page-bytes", "64KiB", "server.max-frame-bytes", "192KiB"));
        try (DocWireClient c = connect(d.port())) {
            hello = c.hello("");
        }
    }

    @AfterAll
    void stop() throws IOException {
        d.close();
    }

    /** §3 Requests. */
    @Nested
    class Requests {
        // §3 LEADING_HITS "How many of the pages, from the first, are stored (host slab or L3) without a gap"
        @Test
        void leadingHitsCountsThePrefixWithoutAGap() throws IOException {
            Ns ns = Ns.fresh();
            List<Page> pages = randomPages(5, 100);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(fill(3, OK), c.put(ns, 0, pages.subList(0, 3)));
                assertArrayEquals(new int[] {OK}, c.put(ns, pages.get(4)));
                assertEquals(3, c.leadingHits(ns, pages));
                assertEquals(1, c.leadingHits(ns, List.of(pages.get(0), pages.get(3), pages.get(1))));
                assertEquals(0, c.leadingHits(ns, List.of(pages.get(3), pages.get(0))));
                assertEquals(0, c.leadingHits(ns, List.of()));
                assertEquals(2, c.leadingHits(ns, List.of(pages.get(4), pages.get(4), pages.get(3))));
            }
        }

        // §3 GET: statuses, "The answer's length and crc32c are the stored page's (0 for a MISS). The bodies of the OK
        // pages follow the table, in request order, each exactly length bytes; other pages have no body."
        @Test
        void getAnswersOkMissAndSizeMismatchWithBodiesOfOkPagesOnly() throws IOException {
            Ns ns = Ns.fresh();
            Page a = Page.random(1000);
            Page b = Page.random(3000);
            Page absent = Page.random(10);
            Page other = Page.random(500);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(fill(3, OK), c.put(ns, a, b, other));
                Page shorter = new Page(other.hash(), new byte[499]);
                List<PageAnswer> got = c.get(ns, 0, List.of(b, absent, shorter, a));
                assertEquals(4, got.size());
                assertEquals(
                        new PageAnswer(OK, 3000, b.crc(), 0, null).status(),
                        got.get(0).status());
                assertEquals(3000, got.get(0).length());
                assertEquals(b.crc(), got.get(0).crc());
                assertArrayEquals(b.body(), got.get(0).body());
                assertEquals(MISS, got.get(1).status());
                assertEquals(0, got.get(1).length());
                assertEquals(0, got.get(1).crc());
                assertNull(got.get(1).body());
                assertEquals(SIZE_MISMATCH, got.get(2).status());
                assertEquals(500, got.get(2).length(), "the stored page's length");
                assertEquals(other.crc(), got.get(2).crc(), "the stored page's crc");
                assertArrayEquals(a.body(), got.get(3).body());
                assertEquals(crc32c(got.get(3).body()), got.get(3).crc());
            }
        }

        // §3 GET "length in the request is the size the client expects, at least 1 (a 0 makes the whole request
        // ERROR MALFORMED: no page is empty)"
        @Test
        void getWithALengthOfZeroIsMalformed() throws IOException {
            Ns ns = Ns.fresh();
            Page p = Page.random(100);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(new int[] {OK}, c.put(ns, p));
                c.callError(GET, 0, getPayload(ns, List.of(p, new Page(randomHash(), new byte[0]))), E_MALFORMED);
                assertEquals(OK, c.get(ns, p).get(0).status());
            }
        }

        // §3 PUT statuses per page: OK; FAILED "A body whose CRC-32C differs from crc32c is not stored"; REJECTED "one
        // over max_page_bytes"; a page of exactly max_page_bytes is stored
        @Test
        void putAnswersAStatusPerPage() throws IOException {
            Ns ns = Ns.fresh();
            Page good = Page.random(1000);
            Page badCrc = Page.random(1000);
            Page tooBig = Page.random(MAX_PAGE + 1);
            Page maxSize = Page.random(MAX_PAGE);
            Buf b = new Buf().ns(ns).u32(4);
            b.bytes(good.hash()).u32(1000).u32(good.crc());
            b.bytes(badCrc.hash()).u32(1000).u32(badCrc.crc() ^ 1);
            b.bytes(tooBig.hash()).u32(tooBig.length()).u32(tooBig.crc());
            b.bytes(maxSize.hash()).u32(maxSize.length()).u32(maxSize.crc());
            b.bytes(good.body()).bytes(badCrc.body()).bytes(tooBig.body()).bytes(maxSize.body());
            try (DocWireClient c = open(d.port())) {
                assertEquals(MAX_PAGE, hello.maxPageBytes());
                assertArrayEquals(new int[] {OK, FAILED, REJECTED, OK}, statuses(c.call(PUT, 0, b.done()), PUT));
                List<PageAnswer> got = c.get(ns, 0, List.of(good, badCrc, tooBig, maxSize));
                assertEquals(
                        List.of(OK, MISS, MISS, OK),
                        got.stream().map(PageAnswer::status).toList());
                assertArrayEquals(maxSize.body(), got.get(3).body());
            }
        }

        // §3 PUT "Pages are content-addressed: a page already stored is EXISTS and its bytes are not rewritten."
        @Test
        void putOfAStoredPageIsExistsAndKeepsItsBytes() throws IOException {
            Ns ns = Ns.fresh();
            Page p = Page.random(800);
            Page sameHash = new Page(p.hash(), Page.random(800).body());
            Page twin = Page.random(300);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(new int[] {OK}, c.put(ns, p));
                assertArrayEquals(new int[] {EXISTS}, c.put(ns, sameHash));
                assertArrayEquals(p.body(), c.get(ns, p).get(0).body());
                assertArrayEquals(new int[] {OK, EXISTS}, c.put(ns, twin, twin), "pages are stored in order");
            }
        }

        // §3 PUT "A length of 0 makes the whole request ERROR MALFORMED"; "the lengths must add up to exactly the rest
        // of the frame, else ERROR MALFORMED"; §3 MALFORMED leaves the connection open
        @Test
        void putWithAZeroLengthOrLengthsNotAddingUpIsMalformedAndStoresNothing() throws IOException {
            Ns ns = Ns.fresh();
            Page p = Page.random(100);
            try (DocWireClient c = open(d.port())) {
                Buf zero = new Buf()
                        .ns(ns)
                        .u32(2)
                        .bytes(p.hash())
                        .u32(100)
                        .u32(p.crc())
                        .bytes(randomHash())
                        .u32(0)
                        .u32(crc32c(new byte[0]))
                        .bytes(p.body());
                c.callError(PUT, 0, zero.done(), E_MALFORMED);
                byte[] whole = putPayload(ns, List.of(p));
                c.callError(PUT, 0, Arrays.copyOf(whole, whole.length - 1), E_MALFORMED);
                c.callError(PUT, 0, new Buf().bytes(whole).u8(0).done(), E_MALFORMED);
                assertEquals(MISS, c.get(ns, p).get(0).status(), "nothing of a MALFORMED PUT is stored");
                assertArrayEquals(new int[] {OK}, c.put(ns, p), "the connection stays");
            }
        }

        // §3 DELETE "OK removed, MISS was not there"; "Removes the pages from the host slab and from L3."
        @Test
        void deleteRemovesFromBothTiers() throws Exception {
            Ns ns = Ns.fresh();
            Page p = Page.random(2000);
            Page q = Page.random(2000);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(new int[] {OK, OK}, c.put(ns, p, q));
                awaitWrittenBehind(c);
                assertArrayEquals(new int[] {OK, MISS}, c.delete(ns, 0, List.of(p.hash(), randomHash())));
                assertArrayEquals(new int[] {MISS}, c.delete(ns, 0, List.of(p.hash())));
                assertEquals(0, c.leadingHits(ns, List.of(p)), "L3 no longer has it");
                assertEquals(MISS, c.get(ns, p).get(0).status());
                assertEquals(OK, c.get(ns, q).get(0).status());
            }
        }

        // §3 CLEAR "Remove every page of the namespace ... from both tiers"; "answer (empty)"
        @Test
        void clearRemovesOneNamespaceFromBothTiers() throws Exception {
            Ns ns = Ns.fresh();
            Ns kept = Ns.fresh();
            List<Page> pages = randomPages(4, 500);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(fill(4, OK), c.put(ns, 0, pages));
                assertArrayEquals(new int[] {OK}, c.put(kept, pages.get(0)));
                awaitWrittenBehind(c);
                Frame f = c.call(CLEAR, 0, new Buf().ns(ns).done());
                expectOp(f, CLEAR);
                assertEquals(0, f.payload().length);
                assertEquals(0, c.leadingHits(ns, pages));
                assertEquals(MISS, c.get(ns, pages.get(3)).get(0).status());
                assertEquals(1, c.leadingHits(kept, pages), "another namespace keeps its pages");
                expectOp(c.call(CLEAR, 0, new Buf().ns(Ns.fresh()).done()), CLEAR);
            }
        }

        // §3 CLEAR_ALL "Remove every page ... (of all namespaces) from both tiers"; "answer (empty)"
        @Test
        void clearAllRemovesEveryNamespace() throws Exception {
            try (TestDaemon own = TestDaemon.start(Map.of());
                    DocWireClient c = open(own.port())) {
                Ns a = Ns.fresh();
                Ns b = Ns.fresh().dtype("fp8_e4m3");
                Page p = Page.random(100);
                assertArrayEquals(new int[] {OK}, c.put(a, p));
                assertArrayEquals(new int[] {OK}, c.put(b, p));
                awaitWrittenBehind(c);
                Frame f = c.call(CLEAR_ALL, 0, new byte[0]);
                expectOp(f, CLEAR_ALL);
                assertEquals(0, f.payload().length);
                assertEquals(0, c.leadingHits(a, List.of(p)));
                assertEquals(0, c.leadingHits(b, List.of(p)));
                assertArrayEquals(new int[] {OK}, c.put(a, p), "stored again after CLEAR_ALL");
            }
        }

        // §3 "STATS answer length:u32 text[length] Prometheus text format, as served on /metrics"; §7 names
        // hicache_server_write_behind_{abandoned_pages_total,failures_total,pending_pages}
        @Test
        void statsIsPrometheusText() throws IOException {
            try (DocWireClient c = open(d.port())) {
                String text = c.stats();
                assertTrue(text.contains("# TYPE "), "Prometheus text format: " + text);
                for (String line : text.split("\n")) {
                    assertTrue(
                            line.isEmpty()
                                    || line.startsWith("#")
                                    || line.matches("[a-zA-Z_:][a-zA-Z0-9_:]*(\\{.*\\})? \\S+( \\d+)?"),
                            "not a sample: " + line);
                }
                for (String name : List.of(
                        "hicache_server_write_behind_abandoned_pages_total",
                        "hicache_server_write_behind_failures_total",
                        "hicache_server_write_behind_pending_pages")) {
                    assertTrue(!Double.isNaN(metric(text, name)), "STATS has " + name);
                }
            }
        }

        // §3 "HEALTH answer state:u8 0 serving"
        @Test
        void healthAnswersServing() throws IOException {
            try (DocWireClient c = open(d.port())) {
                Frame f = c.call(HEALTH, 0, new byte[0]);
                expectOp(f, HEALTH);
                assertArrayEquals(new byte[] {0}, f.payload());
            }
        }

        // §3 LEASE: "a LEASE answers where each OK page lies in the slab file named by HELLO: offset bytes from its
        // start, length bytes long (for other statuses offset is 0xFFFFFFFFFFFFFFFF ...)"; RELEASE "1 released,
        // 0 unknown or already ended"
        @Test
        void leaseAnswersWhereOkPagesLieInTheSlabFile() throws IOException {
            Ns ns = Ns.fresh();
            Page a = Page.random(5000);
            Page b = Page.random(700);
            Page absent = Page.random(10);
            try (DocWireClient c = open(d.port())) {
                assertArrayEquals(new int[] {OK, OK}, c.put(ns, a, b));
                LeaseAnswer l = c.lease(ns, 0, List.of(a, absent, new Page(b.hash(), new byte[701]), b), 30_000);
                assertEquals(
                        List.of(OK, MISS, SIZE_MISMATCH, OK),
                        l.pages().stream().map(PageAnswer::status).toList());
                assertEquals(NO_OFFSET, l.pages().get(1).offset());
                assertEquals(NO_OFFSET, l.pages().get(2).offset());
                for (int i : new int[] {0, 3}) {
                    Page p = i == 0 ? a : b;
                    PageAnswer pa = l.pages().get(i);
                    assertEquals(p.length(), pa.length());
                    assertEquals(p.crc(), pa.crc());
                    assertArrayEquals(p.body(), readSlab(hello.slabPath(), pa.offset(), (int) pa.length()));
                }
                assertEquals(1, c.release(l.leaseId()));
                assertEquals(0, c.release(l.leaseId()), "already ended");
                assertEquals(0, c.release(l.leaseId() ^ 0x5A5A5A5A5A5AL), "unknown");
            }
        }

        // §3 LEASE "until ... hold_ms passes (capped at server.max-lease, default 60 s; expiry is checked every second,
        // so a hold_ms of 0 ends at the next check)"
        @Test
        void leasesEndAtTheirHoldCappedByMaxLease() throws Exception {
            try (TestDaemon own = TestDaemon.start(Map.of("server.max-lease", "1s"));
                    DocWireClient c = open(own.port())) {
                Ns ns = Ns.fresh();
                Page p = Page.random(100);
                assertArrayEquals(new int[] {OK}, c.put(ns, p));
                LeaseAnswer zero = c.lease(ns, 0, List.of(p), 0);
                LeaseAnswer capped = c.lease(ns, 0, List.of(p), 600_000);
                LeaseAnswer held = c.lease(ns, 0, List.of(p), 600_000);
                assertEquals(OK, zero.pages().get(0).status());
                assertEquals(OK, capped.pages().get(0).status());
                assertEquals(1, c.release(held.leaseId()), "a lease holds until released");
                Thread.sleep(2300);
                assertEquals(0, c.release(zero.leaseId()), "hold_ms 0 ends at the next check");
                assertEquals(0, c.release(capped.leaseId()), "hold_ms is capped at server.max-lease");
            }
        }
    }

    /** §1 "Pipelined requests of one connection take effect in the order they were sent whenever one of them writes". */
    @Nested
    class Ordering {
        // §1 "So a PUT then a DELETE of the same page leave it deleted"; §7 "A DELETE or CLEAR also waits for the
        // write-behind batch in flight, so a page written behind while it was being deleted does not come back."
        @Test
        void aPutThenADeleteOfTheSamePageLeaveItDeleted() throws Exception {
            Ns ns = Ns.fresh();
            List<Page> pages = randomPages(20, 60_000);
            try (DocWireClient c = open(d.port())) {
                Map<Long, String> what = new HashMap<>();
                List<byte[]> frames = new ArrayList<>();
                for (Page p : pages) {
                    long put = nextId();
                    long del = nextId();
                    what.put(put, "PUT");
                    what.put(del, "DELETE");
                    frames.add(frame(PUT, put, 0, putPayload(ns, List.of(p))));
                    frames.add(frame(DELETE, del, 0, hashesPayload(ns, List.of(p.hash()))));
                }
                c.write(frames.toArray(byte[][]::new));
                for (int i = 0; i < frames.size(); i++) {
                    Frame f = c.read();
                    String op = what.remove(f.id());
                    assertArrayEquals(
                            new int[] {OK},
                            statuses(f, op.equals("PUT") ? PUT : DELETE),
                            op + " found the page: the DELETE ran after its PUT");
                }
                awaitWrittenBehind(c);
                for (Page p : pages) {
                    assertEquals(MISS, c.get(ns, p).get(0).status(), "the page came back");
                    assertEquals(0, c.leadingHits(ns, List.of(p)));
                }
            }
        }

        // §1 "a GET behind a PUT sees the PUT's pages" (and a LEADING_HITS behind a PUT counts them)
        @Test
        void readsBehindAPutSeeItsPages() throws IOException {
            Ns ns = Ns.fresh();
            List<Page> pages = randomPages(15, 60_000);
            try (DocWireClient c = open(d.port())) {
                Map<Long, Page> gets = new HashMap<>();
                Map<Long, Page> hits = new HashMap<>();
                List<byte[]> frames = new ArrayList<>();
                for (Page p : pages) {
                    long g = nextId();
                    long h = nextId();
                    gets.put(g, p);
                    hits.put(h, p);
                    frames.add(frame(PUT, nextId(), 0, putPayload(ns, List.of(p))));
                    frames.add(frame(GET, g, 0, getPayload(ns, List.of(p))));
                    frames.add(frame(LEADING_HITS, h, 0, hashesPayload(ns, List.of(p.hash()))));
                }
                c.write(frames.toArray(byte[][]::new));
                for (int i = 0; i < frames.size(); i++) {
                    Frame f = c.read();
                    if (gets.containsKey(f.id())) {
                        assertArrayEquals(
                                gets.remove(f.id()).body(), getAnswer(f).get(0).body());
                    } else if (hits.containsKey(f.id())) {
                        expectOp(f, LEADING_HITS);
                        assertEquals(1, f.reader().u32(), "LEADING_HITS behind the PUT counts its page");
                        hits.remove(f.id());
                    } else {
                        assertArrayEquals(new int[] {OK}, statuses(f, PUT));
                    }
                }
            }
        }

        // §1 "a write ... starts only when every earlier request of the connection has finished" (PUT, DELETE, PUT,
        // GET)
        @Test
        void putDeletePutGetTakeEffectInOrder() throws IOException {
            Ns ns = Ns.fresh();
            Page p = Page.random(50_000);
            try (DocWireClient c = open(d.port())) {
                long put1 = nextId();
                long del = nextId();
                long put2 = nextId();
                long get = nextId();
                c.write(
                        frame(PUT, put1, 0, putPayload(ns, List.of(p))),
                        frame(DELETE, del, 0, hashesPayload(ns, List.of(p.hash()))),
                        frame(PUT, put2, 0, putPayload(ns, List.of(p))),
                        frame(GET, get, 0, getPayload(ns, List.of(p))));
                Map<Long, Frame> answers = new HashMap<>();
                for (int i = 0; i < 4; i++) {
                    Frame f = c.read();
                    answers.put(f.id(), f);
                }
                assertArrayEquals(new int[] {OK}, statuses(answers.get(put1), PUT));
                assertArrayEquals(new int[] {OK}, statuses(answers.get(del), DELETE));
                assertArrayEquals(new int[] {OK}, statuses(answers.get(put2), PUT), "stored again, not EXISTS");
                assertArrayEquals(p.body(), getAnswer(answers.get(get)).get(0).body());
            }
        }
    }

    // ---- helpers ----

    static byte[] readSlab(String slabPath, long offset, int length) throws IOException {
        assertNotEquals(NO_OFFSET, offset);
        try (FileChannel ch = FileChannel.open(Path.of(slabPath), StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocate(length);
            while (b.hasRemaining()) {
                if (ch.read(b, offset + b.position()) < 0) {
                    throw new AssertionError("the slab file ends before " + (offset + length));
                }
            }
            return b.array();
        }
    }

    /** The sum of the samples of {@code name} in a STATS text, NaN when there is none. */
    static double metric(String text, String name) {
        double sum = Double.NaN;
        for (String line : text.split("\n")) {
            if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
                String[] parts =
                        line.substring(line.lastIndexOf('}') + 1).trim().split(" ");
                double v = Double.parseDouble(
                        line.startsWith(name + " ")
                                ? line.substring(name.length()).trim().split(" ")[0]
                                : parts[0]);
                sum = Double.isNaN(sum) ? v : sum + v;
            }
        }
        return sum;
    }

    /** Waits (STATS, §7 hicache_server_write_behind_pending_pages) until every page is in L3. */
    static void awaitWrittenBehind(DocWireClient c) throws Exception {
        long end = System.nanoTime() + 10_000_000_000L;
        while (true) {
            double pending = metric(c.stats(), "hicache_server_write_behind_pending_pages");
            assertTrue(!Double.isNaN(pending), "STATS has hicache_server_write_behind_pending_pages");
            if (pending == 0) {
                return;
            }
            assertTrue(System.nanoTime() < end, pending + " pages still not written behind");
            Thread.sleep(20);
        }
    }
}
