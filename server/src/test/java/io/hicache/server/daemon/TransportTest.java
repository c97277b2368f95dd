package io.hicache.server.daemon;

import static io.hicache.server.daemon.Pages.get;
import static io.hicache.server.daemon.Pages.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.storage.remote.protocol.NettyTransport;
import io.hicache.testkit.PagePattern;
import io.netty.channel.epoll.Epoll;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@code server.transport} and {@code remote.transport}: a daemon on NIO and one on epoll each serve a put and a get,
 * to a client on either transport, and the start line says which one runs. Epoll cases are skipped where Netty's
 * native library does not load.
 */
class TransportTest {
    @ParameterizedTest(name = "daemon {0}, client {1}")
    @EnumSource(
            value = NettyTransport.class,
            names = {"NIO", "EPOLL"})
    void aDaemonOnEachTransportServesAPutAndAGet(NettyTransport daemonSide) throws Exception {
        assumeTrue(daemonSide == NettyTransport.NIO || Epoll.isAvailable(), "epoll does not load here");
        try (TestDaemon d = TestDaemon.start(Map.of(
                        "server.store",
                        "none",
                        "server.metrics-port",
                        "-1",
                        "server.transport",
                        daemonSide.configName()));
                Pages pages = new Pages()) {
            assertEquals(daemonSide, d.server.transport());
            assertTrue(d.server.describe().contains("transport " + daemonSide.configName()), d.server.describe());
            for (NettyTransport clientSide : List.of(NettyTransport.NIO, NettyTransport.AUTO)) {
                try (RemotePageStore client = RemotePageStore.open(
                        RemoteStoreConfig.local(d.port(), "").withTransport(clientSide))) {
                    assertEquals(clientSide.resolve(), client.transport());
                    List<StoreKey> keys = pages.keys(Pages.namespace("transport"), 4);
                    assertEquals(4, put(client, pages.filled(keys, 64 * 1024)).count(PageStatus.OK));
                    PageBatch targets = pages.empty(keys, 64 * 1024);
                    assertEquals(4, get(client, targets).count(PageStatus.OK));
                    for (int i = 0; i < keys.size(); i++) {
                        assertTrue(
                                PagePattern.matches(targets.page(i), keys.get(i)), "page " + i + " came back intact");
                    }
                }
            }
        }
    }

    @ParameterizedTest
    @EnumSource(NettyTransport.class)
    void autoPicksEpollWhereItLoads(NettyTransport asked) {
        NettyTransport resolved = asked == NettyTransport.EPOLL && !Epoll.isAvailable() ? null : asked.resolve();
        if (asked == NettyTransport.AUTO) {
            assertEquals(Epoll.isAvailable() ? NettyTransport.EPOLL : NettyTransport.NIO, resolved);
        } else if (resolved != null) {
            assertEquals(asked, resolved);
        }
    }
}
