package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/** docs/protocol.md §1 (Transport and framing), §4 (Errors), §5 (Flow control), §6 (Example), on the wire. */
@Timeout(30)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConformanceFramingTest {
    static final int MAX_PAGE = 64 * 1024;
    static final int MAX_FRAME = 192 * 1024;

    TestDaemon d;
    HelloAnswer hello;

    @BeforeAll
    void start() throws IOException {
        d = TestDaemon.start(Map.of(
                "server.max-page-bytes",
                "64KiB",
                "server.max-frame-bytes",
                "192KiB",
                "server.max-in-flight-bytes",
                "1MiB",
                "server.io-threads",
                "1"));
        try (DocWireClient c = connect(d.port())) {
            hello = c.hello("");
        }
    }

    @AfterAll
    void stop() throws IOException {
        d.close();
    }

    // §1 max_frame_bytes is "sent in the HELLO answer"
    @Test
    void helloAnswerSendsTheConfiguredLimits() {
        assertEquals(MAX_FRAME, hello.maxFrameBytes());
        assertEquals(MAX_PAGE, hello.maxPageBytes());
    }

    // §1 "a length of exactly max_frame_bytes is accepted" (a PUT whose frame is exactly that long is stored)
    @Test
    void aFrameOfExactlyMaxFrameBytesIsAccepted() throws IOException {
        Ns ns = Ns.fresh();
        int n = 3;
        int fixed = HEADER_BYTES + new Buf().ns(ns).done().length + 4 + n * (32 + 4 + 4);
        int bodies = (int) hello.maxFrameBytes() - fixed;
        List<Page> pages = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            pages.add(Page.random(bodies / n + (i < bodies % n ? 1 : 0)));
        }
        byte[] payload = putPayload(ns, pages);
        assertEquals(hello.maxFrameBytes(), HEADER_BYTES + payload.length);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(fill(n, OK), statuses(c.call(PUT, 0, payload), PUT));
            assertEquals(0, c.health());
        }
    }

    // §1 "A frame whose declared length exceeds ... server.max-frame-bytes ... is answered with ERROR TOO_LARGE and
    // the connection is closed before any of its bytes are read"; §4 TOO_LARGE "carry request id 0"
    @Test
    void oneByteOverMaxFrameBytesIsTooLargeBeforeItsBytes() throws IOException {
        try (DocWireClient c = open(d.port())) {
            c.write(new Buf().u32(hello.maxFrameBytes() + 1).done()); // the length only: no byte of the frame follows
            c.expectError(E_TOO_LARGE, 0);
            c.expectClosed();
        }
    }

    // §1 "A declared length under 16 is answered ERROR MALFORMED and closes the connection"; §4 "a frame shorter than
    // a header (request id 0)"; §4 "it runs nothing the client sent behind the frame it refused, even frames it had
    // already received"
    @Test
    void aLengthUnder16IsMalformedWithIdZeroAndNothingBehindItRuns() throws IOException {
        for (int length : new int[] {0, 1, 15}) {
            Ns ns = Ns.fresh();
            Page p = Page.random(100);
            try (DocWireClient c = open(d.port())) {
                c.write(
                        new Buf().u32(length).bytes(new byte[length]).done(),
                        frame(PUT, nextId(), 0, putPayload(ns, List.of(p))));
                c.expectError(E_MALFORMED, 0);
                c.expectClosed();
            }
            try (DocWireClient c = open(d.port())) {
                assertEquals(MISS, c.get(ns, p).get(0).status(), "the PUT behind a " + length + "-byte frame was run");
            }
        }
    }

    // §1 "flags and reserved are 0 in version 1; receivers ignore them"; "Answers set it [timeout_ms] to 0";
    // "the answer to a request carries the same id"; "An answer's op is the request's op | 0x80"
    @Test
    void flagsAndReservedAreIgnoredAndAnswersCarryTheId() throws IOException {
        Ns ns = Ns.fresh();
        Page p = Page.random(10);
        try (DocWireClient c = open(d.port())) {
            long id = 0xFEDCBA9876543210L;
            c.write(frame(PUT, 0xFF, 0xFFFF, id, 12345, putPayload(ns, List.of(p))));
            Frame f = c.read();
            assertEquals(id, f.id());
            assertArrayEquals(new int[] {OK}, statuses(f, PUT)); // checks op | 0x80, flags/reserved/timeout 0
            c.write(frame(HEALTH, 0x01, 0x8000, 0, 0, new byte[0]));
            Frame h = c.read();
            assertEquals(0, h.id(), "request id 0 is an id like another");
            expectOp(h, HEALTH);
        }
    }

    // §1 "A client may send many requests without waiting (pipelining) ... Match answers by id"
    @Test
    void pipelinedRequestsAreAllAnsweredById() throws IOException {
        Ns ns = Ns.fresh();
        List<Page> pages = randomPages(20, 1000);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(fill(20, OK), c.put(ns, 0, pages));
            Map<Long, Page> byId = new HashMap<>();
            List<byte[]> frames = new ArrayList<>();
            for (Page p : pages) {
                long id = nextId();
                byId.put(id, p);
                frames.add(frame(GET, id, 0, getPayload(ns, List.of(p))));
            }
            c.write(frames.toArray(byte[][]::new));
            for (int i = 0; i < pages.size(); i++) {
                Frame f = c.read();
                Page p = byId.remove(f.id());
                assertTrue(p != null, "an answer with an unknown or repeated id: " + f);
                assertArrayEquals(p.body(), getAnswer(f).get(0).body());
            }
        }
    }

    // §1 "Requests the daemon can finish at once are answered in order"
    @Test
    void requestsFinishedAtOnceAreAnsweredInOrder() throws IOException {
        try (DocWireClient c = open(d.port())) {
            List<Long> ids = new ArrayList<>();
            List<byte[]> frames = new ArrayList<>();
            for (int i = 0; i < 30; i++) {
                long id = nextId();
                ids.add(id);
                frames.add(frame(i % 2 == 0 ? HEALTH : STATS, id, 0, new byte[0]));
            }
            c.write(frames.toArray(byte[][]::new));
            for (long id : ids) {
                assertEquals(id, c.read().id());
            }
        }
    }

    // §3 "A request with bytes left over after its payload, or one that ends early, is answered ERROR MALFORMED and
    // the connection stays open."
    @Test
    void leftoverOrMissingBytesAreMalformedAndTheConnectionStays() throws IOException {
        Ns ns = Ns.fresh();
        Page p = Page.random(100);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, p));
            byte[] get = getPayload(ns, List.of(p));
            List<byte[]> bad = List.of(
                    new byte[] {0}, // HEALTH with a byte left over
                    new Buf().bytes(get).u8(7).done(), // GET with a byte left over
                    Arrays.copyOf(get, get.length - 1), // GET that ends early
                    new Buf().ns(ns).done(), // LEADING_HITS without n
                    new Buf().u64(1).u8(0).done()); // RELEASE with a byte left over
            int[] ops = {HEALTH, GET, GET, LEADING_HITS, RELEASE};
            for (int i = 0; i < ops.length; i++) {
                c.callError(ops[i], 0, bad.get(i), E_MALFORMED);
                assertEquals(0, c.health(), "the connection stays after MALFORMED " + i);
            }
            c.callError(STATS, 0, new byte[] {1, 2, 3}, E_MALFORMED);
            c.callError(CLEAR_ALL, 0, new byte[] {1}, E_MALFORMED);
            assertEquals(OK, c.get(ns, p).get(0).status(), "CLEAR_ALL with a byte left over removed pages");
        }
    }

    // §3 "Counts are checked against the bytes the frame really has before anything is allocated for them."
    @Test
    void hugeCountsAreMalformedAtOnce() throws IOException {
        Ns ns = Ns.fresh();
        try (DocWireClient c = open(d.port())) {
            for (int op : new int[] {LEADING_HITS, GET, PUT, DELETE}) {
                byte[] p = new Buf().ns(ns).u32(0xFFFFFFFFL).bytes(new byte[40]).done();
                c.callError(op, 0, p, E_MALFORMED);
            }
            c.callError(LEASE, 0, new Buf().ns(ns).u32(0x7FFFFFFF).u32(0).done(), E_MALFORMED);
            assertEquals(0, c.health());
        }
    }

    // §4 UNKNOWN_OP "an op this version does not define (the message names it in hex; an answer's op, with 0x80 set,
    // is not a request)", connection "stays"
    @Test
    void unknownOpsAreNamedInHexAndTheConnectionStays() throws IOException {
        try (DocWireClient c = open(d.port())) {
            for (int op : new int[] {0x00, 0x02, 0x1A, 0x42, 0x7F, 0x81, 0x91, 0x97, 0xFE, 0xFF}) {
                String m = c.callError(op, 0, new byte[] {1, 2}, E_UNKNOWN_OP).toLowerCase();
                String hex = Integer.toHexString(op);
                assertTrue(
                        Pattern.compile("0x0*" + hex + "\\b").matcher(m).find(),
                        "the message names 0x" + hex + ": " + m);
                assertEquals(0, c.health());
            }
        }
    }

    // §1 "Frames that have arrived only in part hold the daemon's memory, so all connections together may hold at most
    // server.max-partial-frame-bytes ... counted by their declared length when their first 4 bytes arrive. A frame that
    // does not fit is answered ERROR BUSY (request id 0, the message says why), logged, and its connection is closed;
    // other connections go on. Retry later"
    @Test
    void thePartialFrameBudgetRefusesTheFrameThatDoesNotFit() throws Exception {
        try (TestDaemon b = TestDaemon.start(Map.of("server.max-partial-frame-bytes", "3MiB"));
                DocWireClient healthy = open(b.port());
                DocWireClient first = open(b.port());
                DocWireClient second = open(b.port())) {
            Ns ns = Ns.fresh();
            Page big1 = Page.random(2 << 20);
            Page big2 = Page.random(2 << 20);
            long id1 = nextId();
            byte[] f1 = frame(PUT, id1, 0, putPayload(ns, List.of(big1)));
            // §1 "counted by the bytes received so far"
            int sentFirst = 2_000_000;
            first.write(Arrays.copyOf(f1, sentFirst)); // 2 MiB declared, most of it sent
            Thread.sleep(300);
            byte[] f2 = frame(PUT, nextId(), 0, putPayload(ns, List.of(big2)));
            second.setReadTimeout(3000);
            try {
                second.write(Arrays.copyOf(f2, 1_200_000)); // 1.2 MB more: over 3 MiB
            } catch (IOException closedMidWrite) {
                // the daemon may refuse and close before all of it is sent
            }
            Frame busy = second.expectError(E_BUSY, 0);
            assertTrue(!busy.errorMessage().isBlank(), "the message says why");
            second.expectClosed();
            assertEquals(0, healthy.health(), "other connections go on");
            first.write(Arrays.copyOfRange(f1, sentFirst, f1.length));
            Frame a = first.read();
            assertEquals(id1, a.id());
            assertArrayEquals(new int[] {OK}, statuses(a, PUT), "the frame that fitted is served");
            try (DocWireClient retry = open(b.port())) {
                assertArrayEquals(new int[] {OK}, retry.put(ns, big2), "a retry once the budget is free");
            }
        }
    }

    // §5 "A client that pipelines without reading its answers therefore stalls only itself."
    @Test
    void aClientNotReadingItsAnswersStallsOnlyItself() throws Exception {
        Ns ns = Ns.fresh();
        Page p = Page.random(60_000);
        try (DocWireClient greedy = open(d.port());
                DocWireClient other = open(d.port())) {
            assertArrayEquals(new int[] {OK}, greedy.put(ns, p));
            int n = 300; // 18 MB of answers against 1 MiB of in-flight bytes
            CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
                try {
                    for (int i = 0; i < n; i++) {
                        greedy.write(frame(GET, nextId(), 0, getPayload(ns, List.of(p))));
                    }
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
            Thread.sleep(300);
            for (int i = 0; i < 5; i++) {
                assertEquals(0, other.health(), "another connection is served");
            }
            assertArrayEquals(new int[] {OK}, other.put(ns, Page.random(100)));
            for (int i = 0; i < n; i++) {
                assertArrayEquals(p.body(), getAnswer(greedy.read()).get(0).body());
            }
            writer.get(10, TimeUnit.SECONDS);
        }
    }

    // §6 Example: a GET of one 4-byte page, request id 7, namespace m / bfloat16 / layer-major / rank 0 of 1, byte for
    // byte
    @Test
    void theExampleOfSection6ByteForByte() throws IOException {
        Ns ns = Ns.of("m");
        Page p = new Page(randomHash(), new byte[] {1, 2, 3, 4});
        HexFormat hex = HexFormat.of();
        byte[] request = new Buf()
                .bytes(hex.parseHex("0000004c"))
                .bytes(hex.parseHex("1100" + "0000" + "0000000000000007" + "00000000"))
                .bytes(hex.parseHex("00016d"))
                .bytes(hex.parseHex("0008"))
                .bytes(utf8("bfloat16"))
                .bytes(hex.parseHex("00" + "0000" + "0001" + "0000"))
                .bytes(hex.parseHex("00000001"))
                .bytes(p.hash())
                .bytes(hex.parseHex("00000004"))
                .done();
        assertEquals(4 + 76, request.length);
        try (DocWireClient c = open(d.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, p));
            c.write(request);
            Frame f = c.read();
            byte[] expected = new Buf()
                    .bytes(hex.parseHex("9100" + "0000" + "0000000000000007" + "00000000"))
                    .bytes(hex.parseHex("00000001" + "00" + "00000004"))
                    .u32(p.crc())
                    .bytes(p.body())
                    .done();
            assertEquals(33, HEADER_BYTES + f.payload().length, "length 33");
            byte[] got = new Buf()
                    .u8(f.op())
                    .u8(f.flags())
                    .u16(f.reserved())
                    .u64(f.id())
                    .u32(f.timeoutMs())
                    .bytes(f.payload())
                    .done();
            assertArrayEquals(expected, got);
        }
    }
}
