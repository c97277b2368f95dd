package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireCodec.DELETE;
import static io.hicache.server.daemon.DocWireCodec.GET;
import static io.hicache.server.daemon.DocWireCodec.LEADING_HITS;
import static io.hicache.server.daemon.DocWireCodec.OK;
import static io.hicache.server.daemon.DocWireCodec.PUT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.server.daemon.DocWireCodec.Frame;
import io.hicache.server.daemon.DocWireCodec.Ns;
import io.hicache.server.daemon.DocWireCodec.Page;
import io.hicache.server.daemon.DocWireCodec.PageAnswer;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * PUT bodies received straight into their slab rooms ({@link PutLander}): pages arrive whole whatever pieces the
 * socket delivers them in, frames around them pass untouched, a damaged body is not stored and gives its room back, a
 * connection that goes mid-page leaves no room taken, and a landed page still takes effect in the connection's order.
 * Each case checks the landed-pages counter, so that a case passing on the buffered path instead does not pass.
 */
class PutLanderTest {
    private static TestDaemon daemon;

    @BeforeAll
    static void start() throws Exception {
        daemon = TestDaemon.start(
                Map.of("server.store", "none", "server.host-size", "64MiB", "server.put-into-slab", "true"));
    }

    @AfterAll
    static void stop() throws Exception {
        daemon.close();
    }

    private static long landed() {
        return daemon.server.cache.counters.landedPages.sum();
    }

    private static long freeBytes() {
        return daemon.server.cache.space.freeBytes();
    }

    @Test
    void pagesSentInOddPiecesLandWholeBesideSmallOnes() throws Exception {
        Ns ns = Ns.fresh();
        List<Page> pages =
                List.of(Page.random(64 << 10), Page.random(1000), Page.random(200 << 10), Page.random(16 << 10));
        byte[] frame = DocWireCodec.frame(PUT, DocWireClient.nextId(), 0, DocWireCodec.putPayload(ns, pages));
        long before = landed();
        long inPlaceBefore = daemon.server.cache.counters.landedInPlaceBytes.sum();
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            // A length field cut in two, a header cut in two, the table cut in two, then bodies in uneven pieces:
            // each piece is flushed and given time to arrive as its own read.
            int[] cuts = {2, 7, 20, 61, 4_000, 70_000, 150_000, 230_000};
            int from = 0;
            for (int cut : cuts) {
                c.write(Arrays.copyOfRange(frame, from, cut));
                Thread.sleep(15);
                from = cut;
            }
            c.write(Arrays.copyOfRange(frame, from, frame.length));
            Frame answer = c.read();
            int[] statuses = DocWireCodec.statuses(answer, PUT);
            assertArrayEquals(new int[] {OK, OK, OK, OK}, statuses);
            assertEquals(3, landed() - before, "the three pages of 16 KiB or more landed; the small one was copied");
            long inPlace = daemon.server.cache.counters.landedInPlaceBytes.sum() - inPlaceBefore;
            // Of the 280 KiB landed, all but what came in the reads that carried the table and the pieces' starts
            // were read by the socket straight into the rooms.
            assertTrue(inPlace >= 200 << 10, "bytes read in place: " + inPlace);
            List<PageAnswer> back = c.get(ns, pages.toArray(Page[]::new));
            for (int i = 0; i < pages.size(); i++) {
                assertEquals(OK, back.get(i).status(), "page " + i);
                assertArrayEquals(pages.get(i).body(), back.get(i).body(), "page " + i + "'s bytes");
            }
        }
    }

    @Test
    void framesPipelinedAroundALandedPutAreAnsweredInOrder() throws Exception {
        Ns ns = Ns.fresh();
        Page page = Page.random(96 << 10);
        long before = landed();
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            long hits = DocWireClient.nextId();
            long put = DocWireClient.nextId();
            long get = DocWireClient.nextId();
            c.write(
                    DocWireCodec.frame(LEADING_HITS, hits, 0, DocWireCodec.hashesPayload(ns, List.of(page.hash()))),
                    DocWireCodec.frame(PUT, put, 0, DocWireCodec.putPayload(ns, List.of(page))),
                    DocWireCodec.frame(GET, get, 0, DocWireCodec.getPayload(ns, List.of(page))));
            Frame a = c.read();
            assertEquals(hits, a.id());
            Frame b = c.read();
            assertEquals(put, b.id());
            assertArrayEquals(new int[] {OK}, DocWireCodec.statuses(b, PUT));
            Frame g = c.read();
            assertEquals(get, g.id());
            List<PageAnswer> back = DocWireCodec.getAnswer(g);
            assertEquals(OK, back.getFirst().status(), "the GET behind the PUT sees its page");
            assertArrayEquals(page.body(), back.getFirst().body());
            assertEquals(1, landed() - before);
        }
    }

    @Test
    void aDamagedLandedBodyIsNotStoredAndItsRoomIsFreed() throws Exception {
        Ns ns = Ns.fresh();
        Page good = Page.random(64 << 10);
        Page damaged = Page.random(64 << 10);
        long freeBefore = freeBytes();
        long before = landed();
        byte[] payload = DocWireCodec.putPayload(ns, List.of(good, damaged));
        payload[payload.length - 5] ^= 0x40; // in the second body, after its checksum was taken
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            c.write(DocWireCodec.frame(PUT, DocWireClient.nextId(), 0, payload));
            int[] statuses = DocWireCodec.statuses(c.read(), PUT);
            assertEquals(OK, statuses[0]);
            assertEquals(DocWireCodec.FAILED, statuses[1], "the damaged page is FAILED");
            assertEquals(1, landed() - before);
            assertEquals(0, c.leadingHits(ns, List.of(damaged)), "the damaged page is not stored");
            assertEquals(1, c.delete(ns, 0, List.of(good.hash())).length);
        }
        assertEquals(freeBefore, freeBytes(), "both rooms are free again (one stored then deleted, one refused)");
    }

    @Test
    void onACrc32ConnectionLandedPagesAreCheckedByCrc32AndKeptWithTheirCrc32c() throws Exception {
        Ns ns = Ns.fresh();
        Page first = Page.random(64 << 10);
        Page damaged = Page.random(200 << 10);
        Page last = Page.random(64 << 10);
        long freeBefore = freeBytes();
        long before = landed();
        long inPlaceBefore = daemon.server.cache.counters.landedInPlaceBytes.sum();
        byte[] payload = ConformanceVersion2Test.putPayload(ns, List.of(first, damaged, last), true);
        payload[payload.length - (64 << 10) - 70_000] ^= 0x01; // in the second body, in a read of its own
        try (DocWireClient zlib = ConformanceVersion2Test.open2(daemon.port(), ConformanceVersion2Test.CRC_32);
                DocWireClient v1 = DocWireClient.open(daemon.port())) {
            byte[] frame = DocWireCodec.frame(PUT, DocWireClient.nextId(), 0, payload);
            zlib.write(Arrays.copyOf(frame, 100_000));
            Thread.sleep(15);
            zlib.write(Arrays.copyOfRange(frame, 100_000, frame.length));
            int[] statuses = DocWireCodec.statuses(zlib.read(), PUT);
            // the last page is right only if the sums started again after the damaged one
            assertArrayEquals(new int[] {OK, DocWireCodec.FAILED, OK}, statuses, "the damaged page fails its CRC-32");
            assertEquals(2, landed() - before);
            long inPlace = daemon.server.cache.counters.landedInPlaceBytes.sum() - inPlaceBefore;
            assertTrue(inPlace >= 250 << 10, "the bodies were read in place, the damaged one too: " + inPlace);
            for (Page p : List.of(first, last)) {
                PageAnswer back = v1.get(ns, p).getFirst();
                assertEquals(OK, back.status());
                assertEquals(p.crc(), back.crc(), "the slab keeps the landed page's CRC-32C");
                assertArrayEquals(p.body(), back.body());
            }
            assertEquals(0, v1.leadingHits(ns, List.of(damaged)), "the damaged page is not stored");
            assertEquals(2, v1.delete(ns, 0, List.of(first.hash(), last.hash())).length);
        }
        assertEquals(freeBefore, freeBytes(), "every room is free again");
    }

    @Test
    void aConnectionThatGoesMidPageLeavesNoRoomTaken() throws Exception {
        Ns ns = Ns.fresh();
        List<Page> pages = List.of(Page.random(128 << 10), Page.random(128 << 10));
        byte[] frame = DocWireCodec.frame(PUT, DocWireClient.nextId(), 0, DocWireCodec.putPayload(ns, pages));
        long freeBefore = freeBytes();
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            c.write(Arrays.copyOf(frame, frame.length / 2));
            long end = System.nanoTime() + 5_000_000_000L;
            while (freeBytes() == freeBefore && System.nanoTime() < end) {
                Thread.sleep(5); // the rooms are taken once the table is in
            }
            assertTrue(freeBytes() < freeBefore, "the half-sent PUT holds rooms while it arrives");
        }
        long end = System.nanoTime() + 5_000_000_000L;
        while (freeBytes() != freeBefore && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(freeBefore, freeBytes(), "the closed connection's rooms were freed");
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            assertEquals(0, c.leadingHits(ns, pages), "nothing of the half-sent PUT was stored");
        }
    }

    @Test
    void aLandedPutStillTakesEffectInTheConnectionsOrder() throws Exception {
        Ns ns = Ns.fresh();
        Page page = Page.random(64 << 10);
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, page));
            // DELETE then PUT of the same page in one write: the PUT's room is taken while the DELETE is queued, and
            // the page must be stored after the DELETE ran, not found "stored already" before it.
            long del = DocWireClient.nextId();
            long put = DocWireClient.nextId();
            c.write(
                    DocWireCodec.frame(DELETE, del, 0, DocWireCodec.hashesPayload(ns, List.of(page.hash()))),
                    DocWireCodec.frame(PUT, put, 0, DocWireCodec.putPayload(ns, List.of(page))));
            assertEquals(del, c.read().id());
            Frame p = c.read();
            assertEquals(put, p.id());
            assertArrayEquals(new int[] {OK}, DocWireCodec.statuses(p, PUT), "stored anew after the delete");
            assertEquals(1, c.leadingHits(ns, List.of(page)));
            // PUT then DELETE: the page is gone.
            Page other = Page.random(64 << 10);
            c.write(
                    DocWireCodec.frame(PUT, DocWireClient.nextId(), 0, DocWireCodec.putPayload(ns, List.of(other))),
                    DocWireCodec.frame(
                            DELETE, DocWireClient.nextId(), 0, DocWireCodec.hashesPayload(ns, List.of(other.hash()))));
            c.read();
            c.read();
            assertEquals(0, c.leadingHits(ns, List.of(other)));
        }
    }

    @Test
    void theSamePageTwiceInOnePutIsStoredOnce() throws Exception {
        Ns ns = Ns.fresh();
        Page page = Page.random(32 << 10);
        long freeBefore = freeBytes();
        try (DocWireClient c = DocWireClient.open(daemon.port())) {
            int[] statuses = c.put(ns, 0, List.of(page, page));
            assertArrayEquals(new int[] {OK, DocWireCodec.EXISTS}, statuses);
            assertEquals(1, c.delete(ns, 0, List.of(page.hash())).length);
        }
        assertEquals(freeBefore, freeBytes(), "the second room was freed");
    }

    /**
     * docs/protocol.md §3 PUT, flag 0x01 (UNCHECKED): on a version 2 CRC-32C connection bodies are stored with the
     * client's checksums, landed or copied, damaged ones too, and a GET answers them with that checksum (the reader's
     * check catches them); a CRC-32 reader gets them CORRUPT and the daemon drops them. A version 1 or CRC-32
     * connection ignores the flag and checks.
     */
    @Test
    void aPutFlaggedUncheckedIsStoredWithTheClientsChecksumsAndCaughtByReaders() throws Exception {
        Ns ns = Ns.fresh();
        Page landedDamaged = Page.random(64 << 10);
        Page copiedDamaged = Page.random(1000);
        Page good = Page.random(64 << 10);
        List<Page> pages = List.of(landedDamaged, copiedDamaged, good);
        long before = landed();
        long corruptBefore = daemon.server.cache.counters.corruptPages.sum();
        long uncheckedBefore = daemon.server.cache.counters.uncheckedPages.sum();
        try (DocWireClient checked = ConformanceVersion2Test.open2(daemon.port(), ConformanceVersion2Test.CRC_32C);
                DocWireClient zlib = ConformanceVersion2Test.open2(daemon.port(), ConformanceVersion2Test.CRC_32);
                DocWireClient v1 = DocWireClient.open(daemon.port())) {
            // A version 1 connection and a CRC-32 one ignore the flag: the damaged bodies are FAILED there.
            byte[] v1Payload = damaged(DocWireCodec.putPayload(ns, pages), pages);
            v1.write(DocWireCodec.frame(PUT, UNCHECKED, 0, DocWireClient.nextId(), 0, v1Payload));
            assertArrayEquals(new int[] {FAILED, FAILED, OK}, DocWireCodec.statuses(v1.read(), PUT));
            assertEquals(1, v1.delete(ns, 0, List.of(good.hash())).length);
            byte[] zlibPayload = damaged(ConformanceVersion2Test.putPayload(ns, pages, true), pages);
            zlib.write(DocWireCodec.frame(PUT, UNCHECKED, 0, DocWireClient.nextId(), 0, zlibPayload));
            assertArrayEquals(new int[] {FAILED, FAILED, OK}, DocWireCodec.statuses(zlib.read(), PUT));
            assertEquals(1, v1.delete(ns, 0, List.of(good.hash())).length);
            assertEquals(uncheckedBefore, daemon.server.cache.counters.uncheckedPages.sum(), "both were checked");

            byte[] payload = damaged(DocWireCodec.putPayload(ns, pages), pages);
            long landedBefore = landed();
            checked.write(DocWireCodec.frame(PUT, UNCHECKED, 0, DocWireClient.nextId(), 0, payload));
            assertArrayEquals(new int[] {OK, OK, OK}, DocWireCodec.statuses(checked.read(), PUT), "stored unchecked");
            assertEquals(2, landed() - landedBefore, "the two pages of 64 KiB landed, the small one was copied");
            assertEquals(uncheckedBefore + 3, daemon.server.cache.counters.uncheckedPages.sum());
            List<PageAnswer> back = checked.get(ns, pages.toArray(Page[]::new));
            for (int i = 0; i < pages.size(); i++) {
                Page sent = pages.get(i);
                assertEquals(OK, back.get(i).status(), "page " + i);
                assertEquals(sent.crc(), back.get(i).crc(), "page " + i + " is answered with the client's checksum");
                assertEquals(
                        i < 2,
                        DocWireCodec.crc32c(back.get(i).body()) != back.get(i).crc(),
                        "page " + i + ": the damaged bodies do not match it, so the reader's check catches them");
            }
            List<PageAnswer> viaZlib = zlib.get(ns, pages.toArray(Page[]::new));
            assertEquals(CORRUPT, viaZlib.get(0).status(), "checked before a CRC-32 is computed for it");
            assertEquals(CORRUPT, viaZlib.get(1).status());
            assertEquals(OK, viaZlib.get(2).status());
            assertEquals(corruptBefore + 2, daemon.server.cache.counters.corruptPages.sum());
            assertEquals(0, v1.leadingHits(ns, List.of(landedDamaged)), "dropped once found damaged");
            assertEquals(0, v1.leadingHits(ns, List.of(copiedDamaged)));
            assertEquals(1, v1.delete(ns, 0, List.of(good.hash())).length);
        }
        assertEquals(4, landed() - before, "the version 1 and CRC-32 PUTs landed their good page each, this one two");
    }

    /** With an L3, the write-behind checks a page PUT unchecked before it writes it: a damaged one goes nowhere. */
    @Test
    void theWriteBehindDropsADamagedPagePutUnchecked() throws Exception {
        Ns ns = Ns.fresh();
        Page damaged = Page.random(64 << 10);
        Page good = Page.random(64 << 10);
        List<Page> pages = List.of(damaged, good);
        try (TestDaemon withL3 = TestDaemon.start(Map.of("server.store", "file", "server.host-size", "64MiB"));
                DocWireClient c = ConformanceVersion2Test.open2(withL3.port(), ConformanceVersion2Test.CRC_32C)) {
            byte[] payload = damaged(DocWireCodec.putPayload(ns, pages), pages);
            c.write(DocWireCodec.frame(PUT, UNCHECKED, 0, DocWireClient.nextId(), 0, payload));
            assertArrayEquals(new int[] {OK, OK}, DocWireCodec.statuses(c.read(), PUT));
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (withL3.server.cache.counters.corruptPages.sum() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(1, withL3.server.cache.counters.corruptPages.sum(), "the write-behind found it damaged");
            List<PageAnswer> back = c.get(ns, pages.toArray(Page[]::new));
            assertEquals(DocWireCodec.MISS, back.get(0).status(), "dropped from the slab, never written to L3");
            assertEquals(OK, back.get(1).status());
            assertArrayEquals(good.body(), back.get(1).body());
        }
    }

    /** {@code payload} (a PUT's, of {@code pages}) with one byte of each body but the last flipped. */
    private static byte[] damaged(byte[] payload, List<Page> pages) {
        byte[] out = payload.clone();
        int end = out.length;
        for (int i = pages.size() - 1; i >= 0; i--) {
            int start = end - pages.get(i).length();
            if (i < pages.size() - 1) {
                out[start + pages.get(i).length() / 2] ^= 0x10;
            }
            end = start;
        }
        return out;
    }

    private static final int UNCHECKED = 0x01;
    private static final int FAILED = DocWireCodec.FAILED;
    private static final int CORRUPT = DocWireCodec.CORRUPT;
}
