package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.protocol.Wire;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Points where docs/protocol.md and the daemon differed (issue 24, item 9), each checked against what the document
 * now says: the frame limit is inclusive, a HELLO has no leftovers and is said once, a PUT's pages never evict one
 * another, and frames still arriving share one budget across connections.
 */
class DocumentedEdgesTest {
    private static final int MAX_FRAME = 1 << 20;

    @Test
    void aFrameOfExactlyTheLimitIsReadAndOneByteMoreIsRefusedUnread() throws Exception {
        try (TestDaemon daemon = TestDaemon.start(Map.of(
                        "server.store", "none", "server.max-frame-bytes", "1MiB", "server.max-page-bytes", "64KiB"));
                RawClient raw = new RawClient(daemon.port()).hello("")) {
            // A STATS padded to the limit: read whole, then refused for its leftover bytes, and the connection stays.
            raw.send(RawClient.frame(Wire.STATS, 3, new byte[MAX_FRAME - Wire.HEADER_BYTES]));
            RawClient.Frame f = raw.read();
            assertNotNull(f, "a frame of exactly max_frame_bytes must be read, not refused");
            assertEquals(Wire.E_MALFORMED, f.errorCode(), "answered " + f);
            assertEquals(3, f.requestId());
            raw.send(ByteBuffer.allocate(4 + Wire.HEADER_BYTES)
                    .putInt(MAX_FRAME + 1)
                    .put(Wire.STATS)
                    .array());
            f = raw.read();
            assertEquals(Wire.E_TOO_LARGE, f.errorCode(), "answered " + f);
            assertNull(raw.read(), "the connection closes");
        }
    }

    @Test
    void aHelloWithLeftoverBytesIsMalformedAndASecondHelloIsRefusedWithoutClosing() throws Exception {
        try (TestDaemon daemon = TestDaemon.start(Map.of("server.store", "none"))) {
            try (RawClient raw = new RawClient(daemon.port())) {
                byte[] hello = RawClient.helloPayload(Wire.MAGIC, Wire.VERSION, "");
                raw.send(RawClient.frame(
                        Wire.HELLO,
                        1,
                        ByteBuffer.allocate(hello.length + 3).put(hello).array()));
                RawClient.Frame f = raw.read();
                assertEquals(Wire.E_MALFORMED, f.errorCode(), "answered " + f);
                assertNull(raw.read(), "a refused handshake closes the connection");
            }
            try (RawClient raw = new RawClient(daemon.port()).hello("")) {
                raw.send(RawClient.frame(Wire.HELLO, 2, RawClient.helloPayload(Wire.MAGIC, Wire.VERSION, "")));
                RawClient.Frame f = raw.read();
                assertEquals(Wire.E_MALFORMED, f.errorCode(), "answered " + f);
                assertEquals(2, f.requestId());
                raw.send(RawClient.frame(Wire.HEALTH, 3, new byte[0]));
                f = raw.read();
                assertEquals(Wire.HEALTH | Wire.RESPONSE, f.op(), "the connection stays: " + f);
            }
        }
    }

    /** Without L3 a page evicted is gone: a later page of the same PUT must be refused, not acknowledged over it. */
    @Test
    void pagesOfOnePutNeverEvictOneAnother() throws Exception {
        try (TestDaemon daemon = TestDaemon.start(Map.of(
                        "server.store",
                        "none",
                        "server.max-page-bytes",
                        "64KiB",
                        "server.min-block-bytes",
                        "64KiB",
                        "server.host-size",
                        "256KiB",
                        "server.max-frame-bytes",
                        "1MiB"));
                RemotePageStore client = daemon.client();
                Pages pages = new Pages()) {
            Namespace ns = Pages.namespace("one-put");
            List<StoreKey> keys = pages.keys(ns, 5); // the slab holds 4
            BatchResult r = Pages.put(client, pages.filled(keys, 64 * 1024));
            assertEquals(4, r.count(PageStatus.OK), r.toString());
            assertEquals(PageStatus.REJECTED, r.status(4), r.toString());
            for (int i = 0; i < 4; i++) {
                assertEquals(1, Pages.stored(client, List.of(keys.get(i))), "page " + i + " was acknowledged");
            }
        }
    }

    /** A damaged page in L3 is CORRUPT, for GET and LEASE alike, not MISS: the client must not think it gone. */
    @Test
    void aDamagedL3PageIsCorruptNotMiss(@TempDir Path dir) throws Exception {
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : dir, "hicache-test-slab-");
        try (Pages pages = new Pages()) {
            List<StoreKey> keys = pages.keys(Pages.namespace("damaged"), 1);
            TestDaemon first = TestDaemon.start(Map.of(), hostDir, dir);
            try (RemotePageStore client = first.client()) {
                assertEquals(
                        PageStatus.OK,
                        Pages.put(client, pages.filled(keys, 8192)).status(0));
            } finally {
                first.server.close(); // writes the page behind: it is only in L3 for the next daemon
            }
            TestDaemon second = TestDaemon.start(Map.of(), hostDir, dir);
            try (RemotePageStore client = second.client()) {
                second.corrupter().corrupt(second.server.cache.l3.current().orElseThrow(), keys.get(0));
                BatchResult got = Pages.get(client, pages.empty(keys, 8192));
                assertEquals(PageStatus.CORRUPT, got.status(0), got.toString());
            } finally {
                second.server.close();
            }
        } finally {
            TestDaemon.delete(hostDir);
        }
    }

    @Test
    void framesStillArrivingShareOneBudgetAndTheOneOverItIsRefusedWithBusy() throws Exception {
        try (TestDaemon daemon = TestDaemon.start(Map.of(
                        "server.store",
                        "none",
                        "server.max-frame-bytes",
                        "1MiB",
                        "server.max-page-bytes",
                        "64KiB",
                        "server.max-partial-frame-bytes",
                        "256KiB"));
                RawClient first = new RawClient(daemon.port()).hello("");
                RawClient second = new RawClient(daemon.port()).hello("");
                RawClient healthy = new RawClient(daemon.port()).hello("")) {
            first.send(partOfALargeFrame(200 * 1024));
            awaitHeld(daemon, 200 * 1024);
            second.send(partOfALargeFrame(200 * 1024));
            RawClient.Frame f = second.read();
            assertNotNull(f, "the frame over the budget is answered");
            assertEquals(Wire.E_BUSY, f.errorCode(), "answered " + f);
            assertEquals(0, f.requestId());
            assertTrue(message(f).contains("server.max-partial-frame-bytes"), message(f));
            assertNull(second.read(), "its connection closes");
            healthy.send(RawClient.frame(Wire.HEALTH, 9, new byte[0]));
            assertEquals(Wire.HEALTH | Wire.RESPONSE, healthy.read().op(), "other connections go on");
            assertEquals(1, daemon.server.metrics.partialFramesRefused.getLongValue());
        }
    }

    /** The first {@code bytes} of a PUT frame that declares 1 MiB - 16 bytes. */
    private static byte[] partOfALargeFrame(int bytes) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] start = ByteBuffer.allocate(4 + Wire.HEADER_BYTES)
                .putInt(MAX_FRAME - 16)
                .put(Wire.PUT)
                .put((byte) 0)
                .putShort((short) 0)
                .putLong(5)
                .putInt(0)
                .array();
        b.writeBytes(start);
        b.writeBytes(new byte[bytes - start.length]);
        return b.toByteArray();
    }

    private static void awaitHeld(TestDaemon daemon, long bytes) throws InterruptedException {
        long end = System.nanoTime() + 10_000_000_000L;
        while (daemon.server.partialFrames.heldBytes() < bytes && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(bytes, daemon.server.partialFrames.heldBytes(), "the first connection's partial frame is held");
    }

    static String message(RawClient.Frame f) {
        ByteBuffer p = f.payload().duplicate();
        p.getShort();
        byte[] text = new byte[Short.toUnsignedInt(p.getShort())];
        p.get(text);
        return new String(text, StandardCharsets.UTF_8);
    }
}
