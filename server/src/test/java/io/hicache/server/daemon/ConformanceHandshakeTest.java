package io.hicache.server.daemon;

import static io.hicache.server.daemon.DocWireClient.*;
import static io.hicache.server.daemon.DocWireCodec.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/** docs/protocol.md §2 (Handshake), checked on the wire with {@link DocWireClient}. */
@Timeout(30)
class ConformanceHandshakeTest {

    /** A daemon with the defaults (no token). */
    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class WithoutToken {
        TestDaemon d;

        @BeforeAll
        void start() throws IOException {
            d = TestDaemon.start(Map.of());
        }

        @AfterAll
        void stop() throws IOException {
            d.close();
        }

        // §2 "HELLO answer version:u16 max_frame_bytes:u32 max_page_bytes:u32 slab_path:string";
        // §1 "server.max-frame-bytes (default 68 MiB, sent in the HELLO answer)"; §2 "slab_path is the host slab's
        // file"
        @Test
        void helloAnswerCarriesVersionLimitsAndSlabFile() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                long id = nextId();
                c.write(frame(HELLO, id, 0, helloPayload("")));
                Frame f = c.read();
                assertEquals(id, f.id(), "§1: the answer carries the request's id");
                assertEquals(HELLO | 0x80, f.op(), "§1: an answer's op is the request's op | 0x80");
                HelloAnswer a = helloAnswer(f);
                assertEquals(1, a.version());
                assertEquals(68L << 20, a.maxFrameBytes(), "§1: default max-frame-bytes 68 MiB");
                assertTrue(a.maxPageBytes() > 0 && a.maxPageBytes() < a.maxFrameBytes());
                assertTrue(Files.isRegularFile(Path.of(a.slabPath())), "slab_path names a file: " + a.slabPath());
                assertEquals(0, c.health(), "the connection serves after HELLO");
            }
        }

        // §2 "The first frame on a connection must be HELLO. Anything else is answered ERROR AUTH and the connection
        // closes."
        @Test
        void requestBeforeHelloIsAuthAndCloses() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                c.write(frame(HEALTH, nextId(), 0, new byte[0]));
                Frame f = c.read();
                assertTrue(f.isError(), "got " + f);
                assertEquals(E_AUTH, f.errorCode(), "got " + f);
                c.expectClosed();
            }
        }

        // §2 "A bad magic (ERROR MALFORMED) ... close the connection."
        @Test
        void badMagicIsMalformedAndCloses() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                long id = nextId();
                c.write(frame(HELLO, id, 0, helloPayload(0x48435751, VERSION, new byte[0])));
                c.expectError(E_MALFORMED, id);
                c.expectClosed();
            }
        }

        // §2 "another version (ERROR VERSION, naming the daemon's) ... close the connection." (it speaks 1 to 3)
        @Test
        void otherVersionIsVersionNamingTheDaemonsAndCloses() throws IOException {
            for (int v : new int[] {0, 4, 0xFFFF}) {
                try (DocWireClient c = connect(d.port())) {
                    long id = nextId();
                    c.write(frame(HELLO, id, 0, helloPayload(MAGIC, v, new byte[0])));
                    Frame f = c.expectError(E_VERSION, id);
                    assertTrue(
                            f.errorMessage().contains("1") && f.errorMessage().contains("3"),
                            "the message names versions 1 to 3: " + f.errorMessage());
                    c.expectClosed();
                }
            }
        }

        // §2 "a HELLO with bytes after its token (ERROR MALFORMED) ... close the connection."
        @Test
        void helloWithTrailingBytesIsMalformedAndCloses() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                long id = nextId();
                byte[] p = new Buf().bytes(helloPayload("")).u8(0).done();
                c.write(frame(HELLO, id, 0, p));
                c.expectError(E_MALFORMED, id);
                c.expectClosed();
            }
        }

        // §2 "a daemon without a token refuses a HELLO that carries one"; "a wrong token (ERROR AUTH) ... close"
        @Test
        void daemonWithoutTokenRefusesHelloCarryingOne() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                long id = nextId();
                c.write(frame(HELLO, id, 0, helloPayload("x")));
                c.expectError(E_AUTH, id);
                c.expectClosed();
            }
        }

        // §2 "A second HELLO on a connection whose HELLO was accepted is answered ERROR MALFORMED ("HELLO was already
        // accepted"); the connection stays as it was."
        @Test
        void secondHelloIsMalformedAndConnectionStays() throws IOException {
            try (DocWireClient c = open(d.port())) {
                Ns ns = Ns.fresh();
                Page p = Page.random(100);
                assertArrayEquals(new int[] {OK}, c.put(ns, p));
                String m = c.callError(HELLO, 0, helloPayload(""), E_MALFORMED);
                assertTrue(m.contains("already accepted"), "message: " + m);
                assertEquals(0, c.health());
                assertEquals(OK, c.get(ns, p).get(0).status());
            }
        }

        // §4 "When the daemon closes a connection after an ERROR, it runs nothing the client sent behind the frame it
        // refused, even frames it had already received." (a wrong HELLO, then a good HELLO and a PUT, sent together)
        @Test
        void nothingBehindARefusedHelloRuns() throws IOException {
            Ns ns = Ns.fresh();
            Page p = Page.random(64);
            try (DocWireClient c = connect(d.port())) {
                long id = nextId();
                c.write(
                        frame(HELLO, id, 0, helloPayload("wrong")),
                        frame(HELLO, nextId(), 0, helloPayload("")),
                        frame(PUT, nextId(), 0, putPayload(ns, List.of(p))));
                c.expectError(E_AUTH, id);
                c.expectClosed();
            }
            try (DocWireClient c = open(d.port())) {
                assertEquals(MISS, c.get(ns, p).get(0).status(), "the PUT behind the refused HELLO was run");
            }
        }

        // §2 "Requests may be pipelined right behind the HELLO: they are run after its answer."
        @Test
        void requestsPipelinedBehindHelloRunAfterItsAnswer() throws IOException {
            Ns ns = Ns.fresh();
            Page p = Page.random(500);
            try (DocWireClient c = connect(d.port())) {
                long hello = nextId();
                long put = nextId();
                long get = nextId();
                c.write(
                        frame(HELLO, hello, 0, helloPayload("")),
                        frame(PUT, put, 0, putPayload(ns, List.of(p))),
                        frame(GET, get, 0, getPayload(ns, List.of(p))));
                Frame first = c.read();
                assertEquals(hello, first.id(), "HELLO is answered first: " + first);
                helloAnswer(first);
                Frame second = c.read();
                assertEquals(put, second.id(), "§1 the GET waits for the PUT before it: " + second);
                assertArrayEquals(new int[] {OK}, statuses(second, PUT));
                Frame third = c.read();
                assertEquals(get, third.id());
                PageAnswer a = getAnswer(third).get(0);
                assertEquals(OK, a.status());
                assertArrayEquals(p.body(), a.body());
            }
        }

        // §2 "Until its HELLO is accepted ... a frame longer than the longest HELLO (2,077 bytes with its length field)
        // is answered ERROR TOO_LARGE on its declared length, without waiting for its bytes, and the connection
        // closes";
        // §4 TOO_LARGE carries request id 0
        @Test
        void preHelloFrameOverTheLongestHelloIsTooLargeWithoutItsBytes() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                c.write(new Buf().u32(2074).done()); // 2,078 bytes with its length field; nothing more is sent
                c.expectError(E_TOO_LARGE, 0);
                c.expectClosed();
            }
        }

        // §2 the longest version 1 HELLO (a 2,048-byte token: 2,076 bytes with its length field) is not TOO_LARGE: it
        // is
        // read and judged on its token (ERROR AUTH here, the daemon has none)
        @Test
        void theLongestHelloIsReadWhole() throws IOException {
            byte[] token = new byte[2048];
            Arrays.fill(token, (byte) 't');
            byte[] hello = frame(HELLO, nextId(), 0, helloPayload(MAGIC, VERSION, token));
            assertEquals(2076, hello.length);
            try (DocWireClient c = connect(d.port())) {
                c.write(hello);
                Frame f = c.read();
                assertTrue(f.isError() && f.errorCode() == E_AUTH, "expected ERROR AUTH, got " + f);
                c.expectClosed();
            }
        }

        // §2 "A daemon bound to anything but loopback refuses to start without one [a token]."
        @Test
        void daemonBeyondLoopbackRefusesToStartWithoutToken() {
            assertThrows(
                    RuntimeException.class,
                    () -> TestDaemon.start(Map.of("server.bind", "0.0.0.0")).close());
        }
    }

    /** A daemon with {@code server.auth-token}. */
    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class WithToken {
        static final String TOKEN = "s3cret-tøken";
        TestDaemon d;

        @BeforeAll
        void start() throws IOException {
            d = TestDaemon.start(Map.of("server.auth-token", TOKEN));
        }

        @AfterAll
        void stop() throws IOException {
            d.close();
        }

        // §2 "The token is server.auth-token ... and must match it byte for byte"
        @Test
        void theTokenIsAccepted() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                assertEquals(1, c.hello(TOKEN).version());
                assertEquals(0, c.health());
            }
        }

        // §2 "a wrong token (ERROR AUTH) ... close the connection"; "must match it byte for byte"
        @Test
        void aWrongTokenIsAuthAndCloses() throws IOException {
            for (String wrong : List.of("", "s3cret-tøkeN", TOKEN + " ", TOKEN.substring(1), TOKEN + "\0")) {
                try (DocWireClient c = connect(d.port())) {
                    long id = nextId();
                    c.write(frame(HELLO, id, 0, helloPayload(wrong)));
                    c.expectError(E_AUTH, id);
                    c.expectClosed();
                }
            }
        }
    }

    /** A daemon with one connection at most and a short handshake timeout. */
    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class Limits {
        TestDaemon d;

        @BeforeAll
        void start() throws IOException {
            d = TestDaemon.start(Map.of("server.max-connections", "1", "server.handshake-timeout", "300ms"));
        }

        @AfterAll
        void stop() throws IOException {
            d.close();
        }

        /**
         * Each case starts with the one slot free: the previous case's connection may still be closing on the
         * daemon's side, and a new one would then be BUSY instead of what the case checks.
         */
        @BeforeEach
        void slotFree() throws InterruptedException {
            d.awaitNoConnections();
        }

        // §2 "a connection with no HELLO within server.handshake-timeout (default 5 s) is answered ERROR AUTH
        // (request id 0) and closed, which frees its slot"
        @Test
        void noHelloInTimeIsAuthWithIdZeroAndFreesTheSlot() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                long t0 = System.nanoTime();
                c.expectError(E_AUTH, 0);
                c.expectClosed();
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue(ms < 4000, "closed after " + ms + " ms, the timeout is 300 ms");
            }
            try (DocWireClient c = openWithRetry()) {
                assertEquals(0, c.health(), "the slot was freed");
            }
        }

        // §2 the handshake timeout also closes a connection whose HELLO is only partly sent
        @Test
        void aHalfSentHelloIsClosedAtTheHandshakeTimeout() throws IOException {
            try (DocWireClient c = connect(d.port())) {
                byte[] hello = frame(HELLO, nextId(), 0, helloPayload(""));
                c.write(Arrays.copyOf(hello, 10));
                c.expectError(E_AUTH, 0);
                c.expectClosed();
            }
        }

        // §2 the timeout concerns connections without a HELLO only
        @Test
        void anAcceptedConnectionOutlivesTheHandshakeTimeout() throws Exception {
            try (DocWireClient c = openWithRetry()) {
                Thread.sleep(700);
                assertEquals(0, c.health());
            }
        }

        // §2 "A daemon at server.max-connections answers a new connection ERROR BUSY (request id 0) and closes it."
        @Test
        void aConnectionOverTheLimitIsBusyWithIdZero() throws IOException {
            try (DocWireClient first = openWithRetry()) {
                try (DocWireClient second = connect(d.port())) {
                    second.expectError(E_BUSY, 0);
                    second.expectClosed();
                }
                assertEquals(0, first.health(), "the first connection goes on");
            }
        }

        /** Opens a connection once the daemon has noticed the previous test's connection closed. */
        private DocWireClient openWithRetry() throws IOException {
            long end = System.nanoTime() + 3_000_000_000L;
            while (true) {
                DocWireClient c = connect(d.port());
                try {
                    c.hello("");
                    return c;
                } catch (IOException | AssertionError e) {
                    c.close();
                    if (System.nanoTime() > end) {
                        throw e;
                    }
                    sleep(50);
                }
            }
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }
}
