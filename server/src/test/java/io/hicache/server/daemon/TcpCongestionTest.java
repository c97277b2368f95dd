package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.netty.channel.Channel;
import io.netty.channel.epoll.Epoll;
import java.io.IOException;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * {@code server.tcp-congestion}: the daemon's connections use the congestion control it names, not the system's; a
 * name the kernel does not have, a malformed one, and the NIO transport are refused at start-up, in words.
 */
class TcpCongestionTest {
    private static final Path PROC = Path.of("/proc/sys/net/ipv4");

    @Test
    void acceptedConnectionsUseTheNamedCongestionControl() throws Exception {
        assumeTrue(Epoll.isAvailable(), "epoll does not load here");
        String system = Files.readString(PROC.resolve("tcp_congestion_control")).trim();
        // One this (unprivileged, perhaps) user may choose that is not the system's: the test then shows a change.
        Optional<String> other = Arrays.stream(Files.readString(PROC.resolve("tcp_allowed_congestion_control"))
                        .trim()
                        .split("\\s+"))
                .filter(n -> !n.isEmpty() && !n.equals(system))
                .findFirst();
        assumeTrue(other.isPresent(), "no congestion control but the system's is allowed here");
        String chosen = other.orElseThrow();
        try (TestDaemon d = TestDaemon.start(Map.of(
                        "server.store",
                        "none",
                        "server.transport",
                        "epoll",
                        "server.resp-port",
                        "0",
                        "server.tcp-congestion",
                        chosen));
                Pages pages = new Pages();
                RemotePageStore client = d.client();
                Socket redis = new Socket("127.0.0.1", d.server.respPort())) {
            assertTrue(d.server.describe().contains("TCP congestion control " + chosen), d.server.describe());
            List<StoreKey> keys = pages.keys(Pages.namespace("congestion"), 2);
            assertEquals(2, Pages.put(client, pages.filled(keys, 64 * 1024)).count(PageStatus.OK));
            // Both protocols' connections: the binary one and the Redis one (accepted on its own listener).
            long until = System.nanoTime() + 5_000_000_000L;
            while (d.server.openConnections().size() < 2 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            List<Channel> open = List.copyOf(d.server.openConnections());
            assertEquals(2, open.size(), "the binary and the Redis connection are open on the daemon");
            assertTrue(redis.isConnected());
            for (Channel c : open) {
                assertEquals(chosen, TcpCongestion.get(c), "an accepted connection's congestion control");
            }
        }
        try (TestDaemon d = TestDaemon.start(Map.of("server.store", "none", "server.transport", "epoll"));
                Pages pages = new Pages();
                RemotePageStore client = d.client()) {
            List<StoreKey> keys = pages.keys(Pages.namespace("congestion"), 1);
            assertEquals(1, Pages.put(client, pages.filled(keys, 4096)).count(PageStatus.OK));
            List<Channel> open = List.copyOf(d.server.openConnections());
            assertFalse(open.isEmpty(), "the client's connection is open on the daemon");
            for (Channel c : open) {
                assertEquals(system, TcpCongestion.get(c), "unset: the system's");
                assertNotEquals(chosen, TcpCongestion.get(c));
            }
            // Where the system's is BBR the start line points at the setting; otherwise it says nothing of it.
            assertEquals(
                    system.equals("bbr"),
                    d.server.describe().contains("server.tcp-congestion cubic avoids that"),
                    d.server.describe());
        }
    }

    @Test
    void aNameTheKernelLacksIsRefusedAtStart() throws InterruptedException {
        assumeTrue(Epoll.isAvailable(), "epoll does not load here");
        long before = startedThreads();
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> TestDaemon.start(Map.of(
                        "server.store", "none", "server.transport", "epoll", "server.tcp-congestion", "nosuchcc")));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(e.getMessage().contains("server.tcp-congestion nosuchcc refused"), e.getMessage());
        assertTrue(e.getMessage().contains("tcp_available_congestion_control"), e.getMessage());
        // The refused start leaves none of its threads (event loops, workers, lease sweeper) behind.
        long until = System.nanoTime() + 5_000_000_000L;
        while (startedThreads() > before && System.nanoTime() < until) {
            Thread.sleep(20);
        }
        assertEquals(before, startedThreads(), "threads of the daemon that did not start");
    }

    /** Live threads of the kinds a daemon starts: Netty's event loops, its workers and its lease sweeper. */
    private static long startedThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(Thread::isAlive)
                .map(Thread::getName)
                .filter(n -> n.startsWith("multiThreadIoEventLoopGroup")
                        || n.contains("server-worker")
                        || n.contains("server-lease-sweeper"))
                .count();
    }

    @Test
    void theNioTransportIsRefused() {
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> TestDaemon.start(
                        Map.of("server.store", "none", "server.transport", "nio", "server.tcp-congestion", "cubic")));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(e.getMessage().contains("needs the epoll transport"), e.getMessage());
    }

    @Test
    void aMalformedNameIsRefusedByTheConfiguration() throws IOException {
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> ServerConfig.from(Settings.builder()
                        .flag("server.tcp-congestion", "cubic; rm")
                        .build()));
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
        assertTrue(e.getMessage().contains("server.tcp-congestion"), e.getMessage());
    }
}
