package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.time.Duration;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The bench's latency proxy moves every byte both ways, unchanged, across requests on one connection; not timed. */
class LatencyProxyTest {
    @Test
    void bytesPassBothWaysUnchangedAcrossRequestsOnOneConnection() throws Exception {
        try (ServerSocket echo = new ServerSocket(0, 16, InetAddress.getLoopbackAddress());
                LatencyProxy proxy = new LatencyProxy(
                        echo.getLocalPort(), new LatencyProxy.Settings(Duration.ofMillis(2), 200_000_000L))) {
            Thread.ofVirtual().start(() -> echoAll(echo));
            URI endpoint = proxy.endpoint();
            try (Socket client = new Socket(endpoint.getHost(), endpoint.getPort())) {
                SplittableRandom random = new SplittableRandom(22);
                for (int request = 0; request < 3; request++) {
                    byte[] sent = new byte[700_000 + request];
                    random.nextBytes(sent);
                    Thread writer = Thread.ofVirtual().start(() -> {
                        try {
                            client.getOutputStream().write(sent);
                        } catch (IOException e) {
                            throw new IllegalStateException(e);
                        }
                    });
                    byte[] back = client.getInputStream().readNBytes(sent.length);
                    writer.join();
                    assertArrayEquals(sent, back, "request " + request);
                }
            }
        }
    }

    @Test
    void closingCutsOpenConnections() throws Exception {
        try (ServerSocket echo = new ServerSocket(0, 16, InetAddress.getLoopbackAddress())) {
            Thread.ofVirtual().start(() -> echoAll(echo));
            LatencyProxy proxy = new LatencyProxy(echo.getLocalPort(), new LatencyProxy.Settings(Duration.ZERO, 0));
            try (Socket client =
                    new Socket(proxy.endpoint().getHost(), proxy.endpoint().getPort())) {
                client.getOutputStream().write(7);
                assertEquals(7, client.getInputStream().read());
                proxy.close();
                int after;
                try {
                    after = client.getInputStream().read();
                } catch (IOException reset) {
                    after = -1;
                }
                assertEquals(-1, after, "the connection is still open after close()");
            }
        }
    }

    @Test
    void settingsDefaultToOneS3ConnectionInARegionAndRejectNegatives() {
        LatencyProxy.Settings defaults = LatencyProxy.Settings.fromSystemProperties();
        assertEquals(Duration.ofMillis(20), defaults.firstByte());
        assertEquals(100_000_000L, defaults.bytesPerSecond());
        assertThrows(IllegalArgumentException.class, () -> new LatencyProxy.Settings(Duration.ofMillis(-1), 0));
    }

    private static void echoAll(ServerSocket listener) {
        while (!listener.isClosed()) {
            try {
                Socket s = listener.accept();
                Thread.ofVirtual().start(() -> {
                    try (s;
                            InputStream in = s.getInputStream();
                            OutputStream out = s.getOutputStream()) {
                        in.transferTo(out);
                    } catch (IOException e) {
                        // the proxy closed
                    }
                });
            } catch (IOException e) {
                return;
            }
        }
    }
}
