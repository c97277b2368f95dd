package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.storage.remote.protocol.Wire;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Before its HELLO a connection is trusted with little: it is closed when no HELLO comes in time (its slot freed), and
 * a frame larger than a HELLO is refused on its declared length, unbuffered. A HELLO with requests pipelined behind it
 * still works.
 */
class HandshakeLimitsTest {
    private static TestDaemon daemon;

    @BeforeAll
    static void start() throws Exception {
        daemon = TestDaemon.start(
                Map.of("server.store", "none", "server.handshake-timeout", "300ms", "server.max-connections", "2"));
    }

    @AfterAll
    static void stop() throws Exception {
        daemon.close();
    }

    @Test
    void aSilentConnectionIsClosedAndItsSlotFreed() throws Exception {
        // With two slots, a connection of another case still closing would make b BUSY instead of timing out.
        daemon.awaitNoConnections();
        try (RawClient a = new RawClient(daemon.port());
                RawClient b = new RawClient(daemon.port())) {
            long start = System.nanoTime();
            RawClient.Frame f = a.read();
            assertTrue(f != null && f.isError(), "answered " + f);
            assertEquals(Wire.E_AUTH, f.errorCode());
            assertNull(a.read(), "closed after the error");
            assertTrue(System.nanoTime() - start < 5_000_000_000L, "closed by the handshake deadline, not later");
            RawClient.Frame g = b.read();
            assertTrue(g != null && g.isError() && g.errorCode() == Wire.E_AUTH, "answered " + g);
        }
        // Both slots are free again: a client with the token gets in.
        try (RawClient c = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            c.send(RawClient.frame(Wire.HEALTH, 3, new byte[0]));
            assertEquals(Wire.HEALTH | Wire.RESPONSE, c.read().op());
        }
    }

    @Test
    void aLargeFrameBeforeHelloIsRefusedWithoutWaitingForItsBytes() throws Exception {
        try (RawClient raw = new RawClient(daemon.port())) {
            // declares 60 MiB and sends only the header: the daemon must not wait for (or buffer) the rest
            raw.send(ByteBuffer.allocate(4 + Wire.HEADER_BYTES)
                    .putInt(60 << 20)
                    .put(Wire.HELLO)
                    .put(new byte[3])
                    .putLong(1)
                    .putInt(0)
                    .array());
            RawClient.Frame f = raw.read();
            assertTrue(f != null && f.isError(), "answered " + f);
            assertEquals(Wire.E_TOO_LARGE, f.errorCode());
        }
    }

    @Test
    void requestsPipelinedBehindAHelloAreServed() throws Exception {
        try (RawClient raw = new RawClient(daemon.port())) {
            ByteArrayOutputStream all = new ByteArrayOutputStream();
            all.write(RawClient.frame(
                    Wire.HELLO, 1, RawClient.helloPayload(Wire.MAGIC, Wire.VERSION, daemon.server.config.authToken())));
            all.write(RawClient.frame(Wire.HEALTH, 2, new byte[0]));
            all.write(RawClient.frame(Wire.STATS, 3, new byte[0]));
            raw.send(all.toByteArray());
            assertEquals(Wire.HELLO | Wire.RESPONSE, raw.read().op());
            assertEquals(Wire.HEALTH | Wire.RESPONSE, raw.read().op());
            assertEquals(Wire.STATS | Wire.RESPONSE, raw.read().op());
        }
    }
}
