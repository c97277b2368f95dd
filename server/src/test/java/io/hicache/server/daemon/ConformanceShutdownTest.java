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
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * docs/protocol.md §3 STATS/HEALTH during a graceful shutdown and §7 "The daemon shuts down", on the wire. The shutdown
 * is {@code close()} of the embedded daemon (§7: "SIGTERM, or close() embedded"); a GET that L3 answers 2 s late keeps
 * it in progress long enough to talk to it.
 */
@Timeout(40)
class ConformanceShutdownTest {

    // §3 "STATS and HEALTH are answered during a graceful shutdown too (HEALTH then answers 1); every other request
    // then gets ERROR SHUTTING_DOWN."; §4 SHUTTING_DOWN "stays until the daemon closes it"; §7 "It stops accepting
    // connections; requests already received finish; ... connections close"
    @Test
    void healthAndStatsAreAnsweredDuringAShutdownAndOtherRequestsAreShuttingDown() throws Exception {
        String name = uniqueName();
        Ns ns = Ns.fresh();
        Page inL3 = Page.random(2000);
        TestDaemon first = TestDaemon.start(delaying(name, "0ms"));
        try (DocWireClient c = open(first.port())) {
            assertArrayEquals(new int[] {OK}, c.put(ns, inL3));
        }
        TestDaemon d = restart(first, delaying(name, "2000ms"));
        int port = d.port();
        CompletableFuture<Void> closing = null;
        try (DocWireClient slow = open(port);
                DocWireClient other = open(port)) {
            long get = nextId();
            slow.write(frame(GET, get, 10_000, getPayload(ns, List.of(inL3))));
            Thread.sleep(100);
            CompletableFuture<Void> closed = new CompletableFuture<>();
            closing = closed;
            Thread.ofPlatform()
                    .name("conformance-close")
                    .start(
                            () -> { // not the common pool: the daemon may use it
                                try {
                                    d.close();
                                    closed.complete(null);
                                } catch (IOException | RuntimeException e) {
                                    closed.completeExceptionally(e);
                                }
                            });
            int state = 0;
            long end = System.nanoTime() + 1_500_000_000L;
            while (state == 0 && System.nanoTime() < end) {
                state = other.health();
                Thread.sleep(10);
            }
            assertEquals(1, state, "HEALTH answers 1 during the shutdown");
            assertTrue(other.stats().contains("# TYPE"), "STATS is answered during the shutdown");
            other.callError(PUT, 0, putPayload(ns, List.of(Page.random(10))), E_SHUTTING_DOWN);
            other.callError(GET, 0, getPayload(ns, List.of(inL3)), E_SHUTTING_DOWN);
            assertEquals(1, other.health(), "the connection stays after SHUTTING_DOWN");
            Frame f = slow.read();
            assertEquals(get, f.id());
            PageAnswer a = getAnswer(f).get(0);
            assertEquals(OK, a.status(), "a request already received finishes");
            assertArrayEquals(inL3.body(), a.body());
            closing.get(30, TimeUnit.SECONDS);
            other.expectClosed();
            slow.expectClosed();
        } finally {
            if (closing == null) {
                d.close();
            } else {
                closing.exceptionally(e -> null).get(30, TimeUnit.SECONDS); // the next test must not overlap it
            }
            DelayingPageStore.drop(name);
        }
        try (DocWireClient late = connect(port)) {
            late.write(frame(HELLO, nextId(), 0, helloPayload("")));
            late.expectClosed();
        } catch (IOException refused) {
            // not accepting connections: refused outright
        }
    }

    // §3 PUT "a graceful shutdown writes every acknowledged page to L3 before the daemon exits"
    @Test
    void aGracefulShutdownWritesEveryAcknowledgedPageToL3() throws IOException {
        String name = uniqueName();
        Ns ns = Ns.fresh();
        List<Page> pages = randomPages(60, 20_000);
        TestDaemon first = TestDaemon.start(delaying(name, "0ms"));
        try (DocWireClient c = open(first.port())) {
            for (int i = 0; i < pages.size(); i += 10) {
                assertArrayEquals(fill(10, OK), c.put(ns, 0, pages.subList(i, i + 10)));
            }
        }
        try (TestDaemon d = restart(first, delaying(name, "0ms"));
                DocWireClient c = open(d.port())) {
            assertEquals(pages.size(), c.leadingHits(ns, 0, hashes(pages)));
        } finally {
            DelayingPageStore.drop(name);
        }
    }
}
