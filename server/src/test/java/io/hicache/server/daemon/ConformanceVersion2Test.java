package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * docs/protocol.md, version 2: the checksum agreed at HELLO (§2) and the same-host writes RESERVE / COMMIT (§3),
 * checked from the document with the test's own codec, against a real daemon on loopback.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConformanceVersion2Test {
    static final int RESERVE = 0x1A, COMMIT = 0x1B;
    static final int CRC_32C = 0, CRC_32 = 1;
    TestDaemon d;

    @BeforeAll
    void start() throws IOException {
        d = TestDaemon.start(Map.of("server.store", "none"));
    }

    @AfterAll
    void stop() throws IOException {
        d.close();
    }

    /** A connection that said a version 2 HELLO with {@code checksum}; the answer's fields are checked. */
    DocWireClient open2(int checksum) throws IOException {
        return open2(d.port(), checksum);
    }

    /** A connection to the daemon on {@code port} that said a version 2 HELLO with {@code checksum}. */
    static DocWireClient open2(int port, int checksum) throws IOException {
        DocWireClient c = DocWireClient.connect(port);
        Frame f = c.call(
                HELLO, 0, new Buf().u32(MAGIC).u16(2).str("").u8(checksum).done());
        expectOp(f, HELLO);
        Reader r = f.reader();
        assertEquals(2, r.u16(), "the answer speaks the client's version");
        r.u32();
        r.u32();
        assertTrue(r.str().endsWith(".slab"));
        assertEquals(checksum, r.u8(), "the answer repeats the checksum in force");
        r.end();
        return c;
    }

    static int crc32(byte[] body) {
        CRC32 c = new CRC32();
        c.update(body);
        return (int) c.getValue();
    }

    static byte[] putPayload(Ns ns, List<Page> pages, boolean zlib) {
        Buf b = new Buf().ns(ns).u32(pages.size());
        pages.forEach(p -> b.bytes(p.hash()).u32(p.length()).u32(zlib ? crc32(p.body()) : p.crc()));
        pages.forEach(p -> b.bytes(p.body()));
        return b.done();
    }

    // §2 version 2 with checksum 1: CRC-32 both ways, and the page is the same page for a version 1 client
    @Test
    void crc32ConnectionsShareEveryPageWithCrc32cOnes() throws IOException {
        Ns ns = Ns.fresh();
        Page p = Page.random(10_000);
        Page damaged = new Page(randomHash(), p.body());
        try (DocWireClient zlib = open2(CRC_32);
                DocWireClient v1 = DocWireClient.open(d.port())) {
            assertArrayEquals(new int[] {OK}, statuses(zlib.call(PUT, 0, putPayload(ns, List.of(p), true)), PUT));
            Buf bad = new Buf()
                    .ns(ns)
                    .u32(1)
                    .bytes(damaged.hash())
                    .u32(damaged.length())
                    .u32(damaged.crc());
            assertArrayEquals(
                    new int[] {FAILED},
                    statuses(zlib.call(PUT, 0, bad.bytes(damaged.body()).done()), PUT),
                    "a CRC-32C sent on a CRC-32 connection does not match");
            PageAnswer viaZlib =
                    getAnswer(zlib.call(GET, 0, getPayload(ns, List.of(p)))).getFirst();
            assertEquals(OK, viaZlib.status());
            assertEquals(crc32(p.body()), viaZlib.crc());
            assertArrayEquals(p.body(), viaZlib.body());
            PageAnswer viaV1 = v1.get(ns, p).getFirst();
            assertEquals(p.crc(), viaV1.crc(), "version 1 gets CRC-32C of the same page");
            assertArrayEquals(p.body(), viaV1.body());
            LeaseAnswer lease = zlib.lease(ns, 0, List.of(p), 5_000);
            assertEquals(crc32(p.body()), lease.pages().getFirst().crc());
            assertEquals(1, zlib.release(lease.leaseId()));
        }
    }

    // §3 LEASE, version 2: the flag 0x01 asks for no checksums (every crc32c 0); a version 1 connection ignores flags
    @Test
    void aLeaseMayAskForNoChecksumsOnVersion2Only() throws IOException {
        Ns ns = Ns.fresh();
        Page p = Page.random(4_000);
        byte[] lease = new Buf()
                .ns(ns)
                .u32(1)
                .bytes(p.hash())
                .u32(p.length())
                .u32(5_000)
                .done();
        try (DocWireClient zlib = open2(CRC_32);
                DocWireClient v1 = DocWireClient.open(d.port())) {
            assertArrayEquals(new int[] {OK}, statuses(zlib.call(PUT, 0, putPayload(ns, List.of(p), true)), PUT));
            long id = DocWireClient.nextId();
            zlib.write(frame(LEASE, 0x01, 0, id, 0, lease));
            LeaseAnswer quiet = leaseAnswer(zlib.read());
            assertEquals(OK, quiet.pages().getFirst().status());
            assertEquals(0, quiet.pages().getFirst().crc(), "no checksum asked for, none given");
            assertEquals(1, zlib.release(quiet.leaseId()));
            id = DocWireClient.nextId();
            v1.write(frame(LEASE, 0x01, 0, id, 0, lease));
            LeaseAnswer ignored = leaseAnswer(v1.read());
            assertEquals(p.crc(), ignored.pages().getFirst().crc(), "version 1 ignores the flag");
            assertEquals(1, v1.release(ignored.leaseId()));
        }
    }

    // §3 LEASE: "The daemon neither evicts nor overwrites a leased page until the lease is released": a page another
    // connection deletes keeps its bytes at the leased offset, its block is not reused by a later put, and once the
    // lease is released the page is gone (MISS)
    @Test
    void aLeasedPageAnotherClientDeletesKeepsItsBytesUntilReleased() throws IOException {
        Ns ns = Ns.fresh();
        Page p = Page.random(64 * 1024);
        MappedByteBuffer slab = mapSlab(slabPath());
        try (DocWireClient reader = DocWireClient.open(d.port());
                DocWireClient other = DocWireClient.open(d.port())) {
            assertArrayEquals(new int[] {OK}, reader.put(ns, p));
            LeaseAnswer lease = reader.lease(ns, 0, List.of(p), 30_000);
            long offset = lease.pages().getFirst().offset();
            assertArrayEquals(new int[] {OK}, other.delete(ns, 0, List.of(p.hash())));
            for (int i = 0; i < 16; i++) {
                assertArrayEquals(new int[] {OK}, other.put(ns, Page.random(64 * 1024)), "puts go on meanwhile");
            }
            byte[] seen = new byte[p.length()];
            slab.get((int) offset, seen);
            assertArrayEquals(p.body(), seen, "the leased bytes stay while the lease holds");
            assertEquals(1, reader.release(lease.leaseId()));
            assertEquals(MISS, reader.get(ns, p).getFirst().status(), "deleted, once no lease holds it");
        }
    }

    // §2 "Any other checksum value is ERROR MALFORMED and closes the connection"
    @Test
    void anUnknownChecksumIsMalformedAndCloses() throws IOException {
        try (DocWireClient c = DocWireClient.connect(d.port())) {
            Frame f = c.call(HELLO, 0, new Buf().u32(MAGIC).u16(2).str("").u8(7).done());
            assertTrue(f.isError() && f.errorCode() == E_MALFORMED, f.toString());
            c.expectClosed();
        }
    }

    // §2 "on a version 1 connection they are ERROR UNKNOWN_OP"
    @Test
    void reserveOnVersion1IsUnknown() throws IOException {
        try (DocWireClient c = DocWireClient.open(d.port())) {
            c.callError(RESERVE, 0, reservePayload(Ns.fresh(), List.of(Page.random(100)), 1000), E_UNKNOWN_OP);
            c.callError(COMMIT, 0, new Buf().u64(1).u32(0).done(), E_UNKNOWN_OP);
        }
    }

    static byte[] reservePayload(Ns ns, List<Page> pages, long holdMs) {
        Buf b = new Buf().ns(ns).u32(pages.size());
        pages.forEach(p -> b.bytes(p.hash()).u32(p.length()));
        return b.u32(holdMs).done();
    }

    record Reservation(long id, int[] statuses, long[] offsets) {}

    static Reservation reserve(DocWireClient c, Ns ns, List<Page> pages, long holdMs) throws IOException {
        Frame f = c.call(RESERVE, 0, reservePayload(ns, pages, holdMs));
        expectOp(f, RESERVE);
        Reader r = f.reader();
        long id = r.u64();
        int n = (int) r.u32();
        int[] st = new int[n];
        long[] off = new long[n];
        for (int i = 0; i < n; i++) {
            st[i] = r.u8();
            off[i] = r.u64();
            assertEquals(st[i] == OK, off[i] != NO_OFFSET, "an offset for OK pages only");
        }
        r.end();
        return new Reservation(id, st, off);
    }

    static int[] commit(DocWireClient c, long id, int[] crcs) throws IOException {
        Buf b = new Buf().u64(id).u32(crcs.length);
        for (int crc : crcs) {
            b.u32(crc);
        }
        return statuses(c.call(COMMIT, 0, b.done()), COMMIT);
    }

    MappedByteBuffer mapSlab(String path) throws IOException {
        try (FileChannel ch = FileChannel.open(Path.of(path), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size());
        }
    }

    String slabPath() throws IOException {
        try (DocWireClient c = DocWireClient.connect(d.port())) {
            return c.hello("").slabPath();
        }
    }

    // §3 RESERVE, write in place, COMMIT: OK pages are stored; a wrong checksum is FAILED and not stored; a stored
    // page is EXISTS at RESERVE; reserved room is nobody's page before COMMIT
    @Test
    void reserveWriteCommitStoresWhatMatchesItsChecksum() throws IOException {
        Ns ns = Ns.fresh();
        Page stored = Page.random(3_000);
        Page good = Page.random(70_000);
        Page bad = Page.random(5_000);
        MappedByteBuffer slab = mapSlab(slabPath());
        try (DocWireClient c = open2(CRC_32)) {
            assertArrayEquals(new int[] {OK}, statuses(c.call(PUT, 0, putPayload(ns, List.of(stored), true)), PUT));
            Reservation res = reserve(c, ns, List.of(good, stored, bad), 10_000);
            assertArrayEquals(new int[] {OK, EXISTS, OK}, res.statuses());
            assertEquals(
                    MISS,
                    getAnswer(c.call(GET, 0, getPayload(ns, List.of(good))))
                            .getFirst()
                            .status(),
                    "reserved room is not a page");
            assertEquals(0, c.leadingHits(ns, List.of(good)));
            slab.put((int) res.offsets()[0], good.body());
            slab.put((int) res.offsets()[2], bad.body());
            int[] statuses = commit(c, res.id(), new int[] {crc32(good.body()), 0, crc32(bad.body()) ^ 1});
            assertArrayEquals(new int[] {OK, EXISTS, FAILED}, statuses);
            List<PageAnswer> got = getAnswer(c.call(GET, 0, getPayload(ns, List.of(good, bad))));
            assertArrayEquals(good.body(), got.get(0).body());
            assertEquals(crc32(good.body()), got.get(0).crc());
            assertEquals(MISS, got.get(1).status(), "a page that failed its checksum is not stored");
            c.callError(
                    COMMIT,
                    0,
                    new Buf().u64(res.id()).u32(3).u32(0).u32(0).u32(0).done(),
                    E_MALFORMED);
        }
        try (DocWireClient v1 = DocWireClient.open(d.port())) {
            assertArrayEquals(good.body(), v1.get(ns, good).getFirst().body(), "a version 1 client reads it too");
            assertEquals(good.crc(), v1.get(ns, good).getFirst().crc());
        }
    }

    // §3 COMMIT with the header flag 0x01: no checksums from the client; the daemon takes each page's from the slab,
    // and a GET answers the bytes written with their checksum
    @Test
    void aCommitMayCarryNoChecksums() throws IOException {
        Ns ns = Ns.fresh();
        Page page = Page.random(40_000);
        MappedByteBuffer slab = mapSlab(slabPath());
        try (DocWireClient c = open2(CRC_32)) {
            Reservation res = reserve(c, ns, List.of(page), 10_000);
            assertArrayEquals(new int[] {OK}, res.statuses());
            slab.put((int) res.offsets()[0], page.body());
            long id = DocWireClient.nextId();
            c.write(frame(
                    COMMIT,
                    0x01,
                    0,
                    id,
                    0,
                    new Buf().u64(res.id()).u32(1).u32(0).done()));
            int[] statuses = statuses(c.read(), COMMIT);
            assertArrayEquals(new int[] {OK}, statuses, "no checksum to match: stored as written");
            PageAnswer got =
                    getAnswer(c.call(GET, 0, getPayload(ns, List.of(page)))).getFirst();
            assertArrayEquals(page.body(), got.body());
            assertEquals(crc32(page.body()), got.crc(), "the page's checksum is taken from the slab");
        }
    }

    // §2 a CRC-32 connection's GET: the daemon checks the slab's bytes against the page's CRC-32C the first time and
    // keeps the CRC-32 it computed; bytes damaged in the slab later arrive with that kept checksum, which the client's
    // check of what it received then fails (the damage is caught at one end or the other, never vouched for)
    @Test
    void aKeptCrc32NeverVouchesForBytesDamagedInTheSlabSince() throws IOException {
        Ns ns = Ns.fresh();
        Page page = Page.random(40_000);
        MappedByteBuffer slab = mapSlab(slabPath());
        try (DocWireClient c = open2(CRC_32)) {
            Reservation res = reserve(c, ns, List.of(page), 10_000);
            int at = (int) res.offsets()[0];
            slab.put(at, page.body());
            assertArrayEquals(new int[] {OK}, commit(c, res.id(), new int[] {crc32(page.body())}));
            for (int i = 0; i < 2; i++) { // the first GET computes the CRC-32, the second sends the kept one
                PageAnswer got =
                        getAnswer(c.call(GET, 0, getPayload(ns, List.of(page)))).getFirst();
                assertEquals(crc32(page.body()), got.crc());
                assertEquals(crc32(got.body()), got.crc(), "what arrived matches its checksum");
            }
            slab.put(at + 100, (byte) ~page.body()[100]);
            PageAnswer damaged =
                    getAnswer(c.call(GET, 0, getPayload(ns, List.of(page)))).getFirst();
            assertEquals(OK, damaged.status(), "sent with the checksum kept from the bytes as stored");
            assertEquals(crc32(page.body()), damaged.crc());
            assertTrue(crc32(damaged.body()) != damaged.crc(), "so the client's check of what arrived fails");
        }
    }

    // Read-side integrity (issue 40, part 2): bytes damaged in the slab before a CRC-32 was ever computed from them
    // are answered CORRUPT and the page is removed (a later GET misses it, or reads L3's good copy through); the
    // daemon counts it in hicache_server_corrupt_pages{tier="slab"}
    @Test
    void aPageDamagedInTheSlabIsCorruptOnceAndThenGone() throws IOException {
        Ns ns = Ns.fresh();
        Page page = Page.random(40_000);
        MappedByteBuffer slab = mapSlab(slabPath());
        long corruptBefore = d.server.cache.counters.corruptPages.sum();
        try (DocWireClient c = open2(CRC_32)) {
            Reservation res = reserve(c, ns, List.of(page), 10_000);
            int at = (int) res.offsets()[0];
            slab.put(at, page.body());
            assertArrayEquals(new int[] {OK}, commit(c, res.id(), new int[] {crc32(page.body())}));
            slab.put(at + 100, (byte) ~page.body()[100]);
            PageAnswer damaged =
                    getAnswer(c.call(GET, 0, getPayload(ns, List.of(page)))).getFirst();
            // CORRUPT here, or MISS if the write-behind's own check found the damage first and removed the page
            assertTrue(damaged.status() == CORRUPT || damaged.status() == MISS, "status " + damaged.status());
            assertEquals(corruptBefore + 1, d.server.cache.counters.corruptPages.sum(), "counted once");
            PageAnswer again =
                    getAnswer(c.call(GET, 0, getPayload(ns, List.of(page)))).getFirst();
            assertTrue(
                    again.status() == MISS || (again.status() == OK && Arrays.equals(page.body(), again.body())),
                    "after the damage: a miss or L3's good copy, never the damaged bytes (" + again.status() + ")");
        }
    }

    // §3 "A reservation not committed ..., or whose connection closes first, is abandoned: its room is freed";
    // RELEASE abandons at once; a COMMIT of another connection's reservation is MALFORMED
    @Test
    void abandonedReservationsGiveTheirRoomBack() throws IOException, InterruptedException {
        Ns ns = Ns.fresh();
        List<Page> pages = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            pages.add(Page.random(1 << 20));
        }
        long free = d.server.cache.space.freeBytes();
        long id;
        try (DocWireClient c = open2(CRC_32C);
                DocWireClient other = open2(CRC_32C)) {
            Reservation res = reserve(c, ns, pages, 60_000);
            assertTrue(d.server.cache.space.freeBytes() <= free - 8L * (1 << 20), "the room is taken");
            other.callError(
                    COMMIT,
                    0,
                    new Buf().u64(res.id()).u32(8).bytes(new byte[32]).done(),
                    E_MALFORMED);
            assertEquals(1, c.release(res.id()), "RELEASE abandons a reservation");
            assertEquals(free, d.server.cache.space.freeBytes());
            id = reserve(c, ns, pages, 60_000).id();
        }
        long end = System.nanoTime() + 5_000_000_000L;
        while (d.server.cache.space.freeBytes() != free && System.nanoTime() < end) {
            Thread.sleep(10); // the daemon sees the connection close
        }
        assertEquals(
                free, d.server.cache.space.freeBytes(), "a closed connection's reservation " + id + " is abandoned");
        try (DocWireClient c = open2(CRC_32C)) {
            Reservation res = reserve(c, ns, pages.subList(0, 1), 0);
            end = System.nanoTime() + 5_000_000_000L;
            while (d.server.cache.space.freeBytes() != free && System.nanoTime() < end) {
                Thread.sleep(50); // expiry is checked every second
            }
            assertEquals(free, d.server.cache.space.freeBytes(), "an expired reservation is abandoned");
            c.callError(COMMIT, 0, new Buf().u64(res.id()).u32(1).u32(0).done(), E_MALFORMED);
        }
    }
}
