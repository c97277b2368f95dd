package io.hicache.server.daemon;

import static io.hicache.server.daemon.ConformanceTiersTest.delaying;
import static io.hicache.server.daemon.ConformanceTiersTest.restart;
import static io.hicache.server.daemon.ConformanceTiersTest.uniqueName;
import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * docs/protocol.md §1 {@code timeout_ms} and §7 "A deadline passes", on the wire: a daemon whose L3 (the
 * {@code delaying} store) answers reads, deletes and clears 1 s late, asked with 200 ms deadlines. Pages "only in
 * L3" were put by a first daemon whose graceful close wrote them behind. A request held behind a slow write of its
 * connection (§1 ordering) is how a deadline passes before a request starts.
 */
@Timeout(30)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConformanceDeadlinesTest {
    static final int SHORT = 200;
    static final int LONG = 10_000;

    final String name = uniqueName();
    final Ns ns = Ns.fresh();
    final Ns clearNs = Ns.fresh();
    final List<Page> forGet = randomPages(2, 1000);
    final List<Page> forLease = randomPages(2, 1000);
    final List<Page> forHits = randomPages(3, 1000);
    final List<Page> forDelete = randomPages(2, 1000);
    final List<Page> forClear = randomPages(2, 1000);
    TestDaemon d;

    @BeforeAll
    void start() throws IOException {
        TestDaemon first = TestDaemon.start(delaying(name, "0ms"));
        try (DocWireClient c = open(first.port())) {
            for (List<Page> pages : List.of(forGet, forLease, forHits, forDelete)) {
                assertArrayEquals(fill(pages.size(), OK), c.put(ns, 0, pages));
            }
            assertArrayEquals(fill(2, OK), c.put(clearNs, 0, forClear));
        }
        d = restart(first, delaying(name, "1000ms"));
    }

    @AfterAll
    void stop() throws IOException {
        d.close();
        DelayingPageStore.drop(name);
    }

    // §1 "GET, LEASE: a page not in the host slab that L3 had not delivered when the deadline passed is TIMED_OUT
    // (MISS only when no tier has it ...). Pages in the host slab are always answered"; §7 "nothing is ever answered
    // OK or MISS because time ran out"
    @Test
    void getOfAPageOnlyInL3PastTheDeadlineIsTimedOut() throws IOException {
        Page inSlab = Page.random(700);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, inSlab));
            List<PageAnswer> got = c.get(ns, SHORT, List.of(forGet.get(0), inSlab, forGet.get(1)));
            assertEquals(
                    List.of(TIMED_OUT, OK, TIMED_OUT),
                    got.stream().map(PageAnswer::status).toList());
            assertArrayEquals(inSlab.body(), got.get(1).body());
        }
    }

    // §1 "GET, LEASE: ... TIMED_OUT"; §3 LEASE "for other statuses offset is 0xFFFFFFFFFFFFFFFF"
    @Test
    void leaseOfAPageOnlyInL3PastTheDeadlineIsTimedOut() throws IOException {
        try (DocWireClient c = open(d.port())) {
            LeaseAnswer l = c.lease(ns, SHORT, forLease, 10_000);
            for (PageAnswer pa : l.pages()) {
                assertEquals(TIMED_OUT, pa.status());
                assertEquals(NO_OFFSET, pa.offset());
            }
        }
    }

    // §1 "LEADING_HITS: when the count needs L3 and L3 has not answered by the deadline, the answer is ERROR TIMED_OUT
    // (a shorter count would say pages are gone)"
    @Test
    void leadingHitsNeverAnswersAShorterCount() throws IOException {
        Page inSlab = Page.random(100);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, inSlab));
            List<byte[]> hashes = hashes(List.of(inSlab, forHits.get(0), forHits.get(1), forHits.get(2)));
            long id = nextId();
            c.write(frame(LEADING_HITS, id, SHORT, hashesPayload(ns, hashes)));
            Frame f = c.read();
            assertEquals(id, f.id());
            if (f.isError()) {
                assertEquals(E_TIMED_OUT, f.errorCode(), "got " + f);
            } else {
                expectOp(f, LEADING_HITS);
                assertEquals(4, f.reader().u32(), "a count short of the stored prefix");
            }
            assertEquals(4, c.leadingHits(ns, LONG, hashes), "with time enough");
        }
    }

    // §1 "DELETE: a page is OK once removed from every tier that had it; a page that L3 had not removed by the
    // deadline is TIMED_OUT and may still be there (delete it again)."
    @Test
    void deleteOfAPageL3HasNotRemovedInTimeIsTimedOut() throws IOException {
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {TIMED_OUT, TIMED_OUT}, c.delete(ns, SHORT, hashes(forDelete)));
            for (int s : c.delete(ns, LONG, hashes(forDelete))) {
                assertTrue(s == OK || s == MISS, "deleted again: " + s);
            }
            assertEquals(0, c.leadingHits(ns, LONG, hashes(forDelete)));
        }
    }

    // §1 "CLEAR, CLEAR_ALL: ... one whose L3 part did not finish in time answers ERROR TIMED_OUT saying it is partial
    // (the host slab's pages are gone, L3 may still hold some: clear again). An empty answer means both tiers are
    // clear."; §4 TIMED_OUT "the message says what was done"
    @Test
    void aClearWhoseL3PartIsLateIsTimedOutAndPartial() throws IOException {
        Page inSlab = Page.random(300);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(clearNs, inSlab));
            String m = c.callError(CLEAR, SHORT, new Buf().ns(clearNs).done(), E_TIMED_OUT);
            assertTrue(m.toLowerCase().contains("partial"), "the message says the clear is partial: " + m);
            assertTrue(c.get(clearNs, SHORT, List.of(inSlab)).get(0).status() != OK, "the slab's pages are gone");
            Frame f = c.call(CLEAR, LONG, new Buf().ns(clearNs).done());
            expectOp(f, CLEAR);
            assertEquals(0, f.payload().length);
            List<PageAnswer> after = c.get(clearNs, LONG, List.of(forClear.get(0), forClear.get(1), inSlab));
            assertEquals(
                    List.of(MISS, MISS, MISS),
                    after.stream().map(PageAnswer::status).toList(),
                    "both tiers clear");
        }
    }

    /** Sends a DELETE that L3 answers 1 s late, then {@code behind} at once; returns the answers by id. */
    private Map<Long, Frame> behindASlowDelete(DocWireClient c, long deleteId, byte[]... behind) throws IOException {
        Page slow = Page.random(100);
        Ns slowNs = Ns.fresh();
        assertArrayEquals(new int[] {OK}, c.put(slowNs, slow));
        byte[][] frames = new byte[behind.length + 1][];
        frames[0] = frame(DELETE, deleteId, LONG, hashesPayload(slowNs, List.of(slow.hash())));
        System.arraycopy(behind, 0, frames, 1, behind.length);
        c.write(frames);
        Map<Long, Frame> answers = new HashMap<>();
        for (int i = 0; i < frames.length; i++) {
            Frame f = c.read();
            answers.put(f.id(), f);
        }
        return answers;
    }

    // §1 "a write (PUT, DELETE, CLEAR, CLEAR_ALL) starts only when every earlier request of the connection has
    // finished"; "CLEAR, CLEAR_ALL: a clear whose deadline had passed before it started answers ERROR TIMED_OUT and
    // removed nothing"
    @Test
    void aClearHeldPastItsDeadlineIsTimedOutAndRemovesNothing() throws IOException {
        Ns other = Ns.fresh();
        Page kept = Page.random(400);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(other, kept));
            long clear = nextId();
            Frame f = behindASlowDelete(
                            c,
                            nextId(),
                            frame(CLEAR, clear, SHORT, new Buf().ns(other).done()))
                    .get(clear);
            assertTrue(f.isError() && f.errorCode() == E_TIMED_OUT, "expected ERROR TIMED_OUT, got " + f);
            assertEquals(OK, c.get(other, SHORT, List.of(kept)).get(0).status(), "the clear removed nothing");
        }
    }

    // §1 "CLEAR, CLEAR_ALL: a clear whose deadline had passed before it started answers ERROR TIMED_OUT and removed
    // nothing" (on a daemon of its own: a CLEAR_ALL that runs wipes every page)
    @Test
    void aClearAllHeldPastItsDeadlineIsTimedOutAndRemovesNothing() throws IOException {
        String own = uniqueName();
        try (TestDaemon d2 = TestDaemon.start(delaying(own, "1000ms"));
                DocWireClient c = open(d2.port())) {
            Page kept = Page.random(400);
            Ns other = Ns.fresh();
            assertArrayEquals(new int[] {OK}, c.put(other, kept));
            long clearAll = nextId();
            Page slow = Page.random(100);
            assertArrayEquals(new int[] {OK}, c.put(other, slow));
            long del = nextId();
            c.write(
                    frame(DELETE, del, LONG, hashesPayload(other, List.of(slow.hash()))),
                    frame(CLEAR_ALL, clearAll, SHORT, new byte[0]));
            Map<Long, Frame> answers = new HashMap<>();
            for (int i = 0; i < 2; i++) {
                Frame f = c.read();
                answers.put(f.id(), f);
            }
            Frame f = answers.get(clearAll);
            assertTrue(f.isError() && f.errorCode() == E_TIMED_OUT, "expected ERROR TIMED_OUT, got " + f);
            assertEquals(OK, c.get(other, SHORT, List.of(kept)).get(0).status(), "the clear removed nothing");
        } finally {
            DelayingPageStore.drop(own);
        }
    }

    // §1 "PUT: ... a page not stored when the deadline passed ... is TIMED_OUT and not stored"; §7 "nothing is ever
    // answered OK ... because time ran out" (a PUT held behind a slow DELETE past its deadline)
    @Test
    void aPutHeldPastItsDeadlineIsTimedOutAndNotStored() throws IOException {
        Ns other = Ns.fresh();
        Page p = Page.random(400);
        try (DocWireClient c = open(d.port())) {
            long put = nextId();
            Frame f = behindASlowDelete(c, nextId(), frame(PUT, put, SHORT, putPayload(other, List.of(p))))
                    .get(put);
            int[] st = statuses(f, PUT);
            PageAnswer now = c.get(other, LONG, List.of(p)).get(0);
            assertEquals(st[0] == OK ? OK : MISS, now.status(), "a PUT answered " + st[0] + " left the page " + now);
            assertArrayEquals(new int[] {TIMED_OUT}, st, "the deadline passed before the PUT could start");
        }
    }

    // §1 "Pipelined requests of one connection take effect in the order they were sent ... So a PUT then a DELETE of
    // the same page leave it deleted, and a GET behind a PUT sees the PUT's pages." (with an L3 that deletes slowly)
    @Test
    void putDeletePutGetTakeEffectInOrderWhateverL3sPace() throws IOException {
        Ns other = Ns.fresh();
        Page p = Page.random(400);
        try (DocWireClient c = open(d.port())) {
            long put1 = nextId();
            long del = nextId();
            long put2 = nextId();
            long get = nextId();
            c.write(
                    frame(PUT, put1, LONG, putPayload(other, List.of(p))),
                    frame(DELETE, del, LONG, hashesPayload(other, List.of(p.hash()))),
                    frame(PUT, put2, LONG, putPayload(other, List.of(p))),
                    frame(GET, get, LONG, getPayload(other, List.of(p))));
            Map<Long, Frame> answers = new HashMap<>();
            for (int i = 0; i < 4; i++) {
                Frame f = c.read();
                answers.put(f.id(), f);
            }
            assertArrayEquals(new int[] {OK}, statuses(answers.get(put1), PUT));
            assertArrayEquals(new int[] {OK}, statuses(answers.get(del), DELETE), "the DELETE found the PUT's page");
            assertArrayEquals(new int[] {OK}, statuses(answers.get(put2), PUT), "the second PUT ran after the DELETE");
            assertArrayEquals(p.body(), getAnswer(answers.get(get)).get(0).body());
        }
    }

    // §1 "Pages in the host slab are always answered, however late." (a GET held behind a slow DELETE)
    @Test
    void aGetHeldPastItsDeadlineStillAnswersSlabPages() throws IOException {
        Ns other = Ns.fresh();
        Page p = Page.random(400);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(other, p));
            long get = nextId();
            long del = nextId();
            Map<Long, Frame> answers = behindASlowDelete(c, del, frame(GET, get, SHORT, getPayload(other, List.of(p))));
            assertArrayEquals(new int[] {OK}, statuses(answers.get(del), DELETE));
            PageAnswer a = getAnswer(answers.get(get)).get(0);
            assertEquals(OK, a.status());
            assertArrayEquals(p.body(), a.body());
        }
    }
}
