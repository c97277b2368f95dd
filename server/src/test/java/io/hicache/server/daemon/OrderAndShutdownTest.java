package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Pipelined writes take effect in the order sent (a DELETE behind a GET that promotes the page from L3 leaves it
 * deleted, not back in the slab), and a daemon shutting down still answers HEALTH (1) and STATS, while other
 * requests get ERROR SHUTTING_DOWN (issue 24, item 9).
 */
class OrderAndShutdownTest {
    private static final int PAGE_BYTES = 4096;
    private final String shared = "order-" + UUID.randomUUID();

    @AfterEach
    void dropStore() {
        DelayingPageStore.drop(shared);
    }

    @Test
    void aDeletePipelinedBehindAGetOfAnL3PageLeavesItDeleted() throws Exception {
        Namespace ns = Pages.namespace("order");
        List<StoreKey> keys;
        try (TestDaemon writer = TestDaemon.start(Map.of("server.store", "delaying", "delaying.shared", shared));
                RemotePageStore client = writer.client();
                Pages pages = new Pages()) {
            keys = pages.keys(ns, 8);
            assertTrue(Pages.put(client, pages.filled(keys, PAGE_BYTES)).allSucceeded());
        } // written behind: the pages are only in L3 for the next daemon
        try (TestDaemon daemon = TestDaemon.start(
                        Map.of("server.store", "delaying", "delaying.shared", shared, "delaying.delay", "200ms"));
                RawClient raw = new RawClient(daemon.port()).hello("")) {
            ByteArrayOutputStream both = new ByteArrayOutputStream();
            both.writeBytes(request(Wire.GET, 1, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(keys.size());
                for (StoreKey k : keys) {
                    Codec.writeHash(b, k.hash());
                    b.writeInt(PAGE_BYTES);
                }
            }));
            both.writeBytes(request(Wire.DELETE, 2, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(keys.size());
                keys.forEach(k -> Codec.writeHash(b, k.hash()));
            }));
            raw.send(both.toByteArray());
            Map<Long, RawClient.Frame> answers = new HashMap<>();
            for (int i = 0; i < 2; i++) {
                RawClient.Frame f = raw.read();
                answers.put(f.requestId(), f);
            }
            ByteBuffer deleted = answers.get(2L).payload();
            assertEquals(keys.size(), deleted.getInt());
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(PageStatus.OK, Wire.status(deleted.get()), "page " + i + " was there to delete");
            }
            try (RemotePageStore client = daemon.client()) {
                assertEquals(0, Pages.stored(client, keys), "a page deleted after it was read must not come back");
            }
        }
    }

    @Test
    void aDaemonShuttingDownAnswersHealthAndStatsAndRefusesTheRest() throws Exception {
        try (TestDaemon daemon = TestDaemon.start(
                        Map.of("server.store", "delaying", "delaying.shared", shared, "delaying.delay", "1500ms"));
                RawClient busy = new RawClient(daemon.port()).hello("");
                RawClient probe = new RawClient(daemon.port()).hello("")) {
            Namespace ns = Pages.namespace("shutdown");
            // A request that needs the slow L3 keeps the shutdown waiting for it.
            busy.send(request(Wire.LEADING_HITS, 1, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(1);
                b.writeBytes(new byte[Wire.HASH_BYTES]);
            }));
            Thread.sleep(100);
            // Not on the common pool: the slow test store answers on it, and close waits for that answer.
            Thread closing = Thread.ofPlatform().name("test-close").start(daemon.server::close);
            long end = System.nanoTime() + 5_000_000_000L;
            while (!daemon.server.shuttingDown() && System.nanoTime() < end) {
                Thread.sleep(2);
            }
            probe.send(RawClient.frame(Wire.HEALTH, 2, new byte[0]));
            RawClient.Frame health = probe.read();
            assertEquals(Wire.HEALTH | Wire.RESPONSE, health.op(), "answered " + health);
            assertEquals(1, health.payload().get(0), "HEALTH says the daemon is shutting down");
            probe.send(RawClient.frame(Wire.STATS, 3, new byte[0]));
            assertEquals(Wire.STATS | Wire.RESPONSE, probe.read().op());
            probe.send(request(Wire.DELETE, 4, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(0);
            }));
            RawClient.Frame refused = probe.read();
            assertTrue(refused.isError(), "answered " + refused);
            assertEquals(Wire.E_SHUTTING_DOWN, refused.errorCode());
            RawClient.Frame count = busy.read();
            assertEquals(Wire.LEADING_HITS | Wire.RESPONSE, count.op(), "the request in flight is answered: " + count);
            closing.join(30_000);
        }
    }

    private interface Payload {
        void write(ByteBuf b);
    }

    private static byte[] request(byte op, long id, Payload payload) {
        ByteBuf b = Unpooled.buffer();
        payload.write(b);
        return RawClient.frame(op, id, ByteBufUtil.getBytes(b));
    }
}
