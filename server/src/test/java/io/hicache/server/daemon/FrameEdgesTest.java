package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.storage.remote.protocol.Wire;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Frames at the edges of the protocol: a refused frame stops its connection there, and errors name ops truly. */
class FrameEdgesTest {
    private static TestDaemon daemon;

    @BeforeAll
    static void start() throws Exception {
        daemon = TestDaemon.start(Map.of("server.store", "none"));
    }

    @AfterAll
    static void stop() throws Exception {
        daemon.close();
    }

    @Test
    void nothingSentBehindAFrameThatClosesTheConnectionRuns() throws Exception {
        try (RawClient raw = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            ByteArrayOutputStream both = new ByteArrayOutputStream();
            both.write(ByteBuffer.allocate(12).putInt(8).putLong(0).array()); // declares 8 bytes: under a header
            both.write(RawClient.frame(Wire.STATS, 42, new byte[0]));
            raw.send(both.toByteArray());
            RawClient.Frame f = raw.read();
            assertTrue(f != null && f.isError(), "answered " + f);
            assertEquals(Wire.E_MALFORMED, f.errorCode());
            assertNull(raw.read(), "the STATS behind the short frame must not run: the connection closes");
        }
    }

    @Test
    void anAnswerOpSentAsARequestIsNamedAsItIs() throws Exception {
        try (RawClient raw = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            raw.send(RawClient.frame(Wire.GET | Wire.RESPONSE, 5, new byte[0]));
            RawClient.Frame f = raw.read();
            assertTrue(f.isError(), "answered " + f);
            assertEquals(Wire.E_UNKNOWN_OP, f.errorCode());
            ByteBuffer p = f.payload().duplicate();
            p.getShort();
            byte[] text = new byte[Short.toUnsignedInt(p.getShort())];
            p.get(text);
            String message = new String(text, StandardCharsets.UTF_8);
            assertTrue(message.contains("0x91"), message);
            assertFalse(message.contains("GET"), message);
        }
    }
}
