package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.StoreKey;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.KeyValue;
import io.lettuce.core.LettuceFutures;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.protocol.ProtocolVersion;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The daemon's Redis protocol (docs/resp.md) spoken by Lettuce, a Java Redis client no one here wrote: RESP3 (its
 * default, through HELLO 3) and RESP2, pipelines, large values, many connections, and the auth token.
 */
class RespLettuceTest {
    private static TestDaemon daemon;
    private static RedisClient client;

    @BeforeAll
    static void start() throws Exception {
        daemon = TestDaemon.start(Map.of("server.resp-port", "0", "server.store", "none"));
        RedisURI uri = RedisURI.create("127.0.0.1", daemon.server.respPort());
        uri.setTimeout(Duration.ofSeconds(20));
        client = RedisClient.create(uri);
    }

    @AfterAll
    static void stop() throws Exception {
        if (client != null) {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        }
        if (daemon != null) {
            daemon.close();
        }
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static void roundTrips(StatefulRedisConnection<byte[], byte[]> c, String prefix) {
        RedisCommands<byte[], byte[]> r = c.sync();
        assertEquals("PONG", r.ping());
        byte[] value = new byte[70_001];
        new Random(7).nextBytes(value);
        assertEquals("OK", r.set(b(prefix + "a"), value));
        assertArrayEquals(value, r.get(b(prefix + "a")));
        assertNull(r.get(b(prefix + "none")));
        assertEquals(70_001L, r.strlen(b(prefix + "a")));
        assertNull(r.set(b(prefix + "a"), b("x"), SetArgs.Builder.nx()), "NX on a stored key: nil");
        assertEquals("OK", r.set(b(prefix + "a"), b("x"), SetArgs.Builder.xx().ex(60)));
        assertArrayEquals(b("x"), r.get(b(prefix + "a")), "SET replaces");
        assertEquals("OK", r.mset(Map.of(b(prefix + "m1"), b("1"), b(prefix + "m2"), b("22"))));
        List<KeyValue<byte[], byte[]>> got = r.mget(b(prefix + "m1"), b(prefix + "m2"), b(prefix + "none"));
        assertArrayEquals(b("1"), got.get(0).getValue());
        assertArrayEquals(b("22"), got.get(1).getValue());
        assertTrue(got.get(2).isEmpty());
        assertEquals(3L, r.exists(b(prefix + "a"), b(prefix + "m1"), b(prefix + "m2"), b(prefix + "none")));
        assertEquals(2L, r.del(b(prefix + "m1"), b(prefix + "m2"), b(prefix + "none")));
        assertEquals(1L, r.unlink(b(prefix + "a")));
        assertEquals(0L, r.exists(b(prefix + "a")));
        assertTrue(r.dbsize() >= 0);
        assertTrue(r.info("keyspace").contains("db0:keys="));
        RedisException wrong = assertThrows(RedisException.class, () -> r.hget(b(prefix + "none"), b("f")));
        assertTrue(wrong.getMessage().contains("HiCache keeps string values only"), wrong.getMessage());
    }

    @Test
    void resp3AndResp2RoundTripEveryCommand() {
        try (StatefulRedisConnection<byte[], byte[]> c = client.connect(ByteArrayCodec.INSTANCE)) {
            roundTrips(c, "resp3-");
        }
        RedisClient two = RedisClient.create(RedisURI.create("127.0.0.1", daemon.server.respPort()));
        two.setOptions(
                ClientOptions.builder().protocolVersion(ProtocolVersion.RESP2).build());
        try (StatefulRedisConnection<byte[], byte[]> c = two.connect(ByteArrayCodec.INSTANCE)) {
            roundTrips(c, "resp2-");
        } finally {
            two.shutdown(0, 2, TimeUnit.SECONDS);
        }
    }

    @Test
    void aPipelineOfLargeValuesComesBackInOrderOverManyConnections() throws Exception {
        List<StatefulRedisConnection<byte[], byte[]>> connections = new ArrayList<>();
        try {
            for (int i = 0; i < 24; i++) {
                connections.add(client.connect(ByteArrayCodec.INSTANCE));
            }
            List<RedisFuture<?>> futures = new ArrayList<>();
            for (int i = 0; i < connections.size(); i++) {
                RedisAsyncCommands<byte[], byte[]> a = connections.get(i).async();
                connections.get(i).setAutoFlushCommands(false);
                for (int j = 0; j < 8; j++) {
                    byte[] value = new byte[(256 << 10) + i * 8 + j];
                    value[0] = (byte) i;
                    value[value.length - 1] = (byte) j;
                    futures.add(a.set(b("pipe-" + i + "-" + j), value));
                }
                for (int j = 0; j < 8; j++) {
                    futures.add(a.get(b("pipe-" + i + "-" + j)));
                }
                connections.get(i).flushCommands();
            }
            assertTrue(LettuceFutures.awaitAll(Duration.ofSeconds(60), futures.toArray(RedisFuture[]::new)));
            int k = 0;
            for (int i = 0; i < connections.size(); i++) {
                k += 8;
                for (int j = 0; j < 8; j++, k++) {
                    byte[] got = (byte[]) futures.get(k).get();
                    assertEquals((256 << 10) + i * 8 + j, got.length);
                    assertEquals((byte) i, got[0]);
                    assertEquals((byte) j, got[got.length - 1]);
                }
            }
        } finally {
            connections.forEach(StatefulRedisConnection::close);
        }
    }

    /**
     * Values the slab evicted (24 of 1 MiB through an 8 MiB slab over a file L3) come back through L3, byte for byte:
     * the daemon remembers the lengths RESP SETs stored, which a GET does not say.
     */
    @Test
    void valuesTheSlabEvictedAreReadThroughL3() throws Exception {
        try (TestDaemon small = TestDaemon.start(
                Map.of("server.resp-port", "0", "server.host-size", "8MiB", "server.max-page-bytes", "2MiB"))) {
            RedisClient c = RedisClient.create(RedisURI.create("127.0.0.1", small.server.respPort()));
            try (StatefulRedisConnection<byte[], byte[]> conn = c.connect(ByteArrayCodec.INSTANCE)) {
                RedisCommands<byte[], byte[]> r = conn.sync();
                byte[][] values = new byte[24][];
                for (int i = 0; i < values.length; i++) {
                    values[i] = new byte[1 << 20];
                    new Random(i).nextBytes(values[i]);
                    assertEquals("OK", r.set(b("l3-" + i), values[i]));
                }
                StoreKey first = RespHandler.keyOf(
                        io.hicache.core.key.Namespace.builder("resp").build(), Unpooled.wrappedBuffer(b("l3-0")));
                assertTrue(!small.holds(first), "the first value left the slab");
                long fromStore = small.server.cache.counters.storeHits.sum();
                for (int i = 0; i < values.length; i++) {
                    assertArrayEquals(values[i], r.get(b("l3-" + i)), "value " + i);
                }
                assertTrue(small.server.cache.counters.storeHits.sum() > fromStore, "some came from L3");
            } finally {
                c.shutdown(0, 2, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void aDaemonWithATokenRefusesWrongPasswordsAndServesTheRightOne() throws Exception {
        try (TestDaemon guarded = TestDaemon.start(
                Map.of("server.resp-port", "0", "server.store", "none", "server.auth-token", "s3cret"))) {
            int port = guarded.server.respPort();
            RedisClient c = RedisClient.create();
            try {
                RedisURI wrong = RedisURI.builder()
                        .withHost("127.0.0.1")
                        .withPort(port)
                        .withPassword("nope".toCharArray())
                        .build();
                RedisException e = assertThrows(
                        RedisException.class, () -> c.connect(wrong).sync().ping());
                assertTrue(
                        String.valueOf(e.getMessage()).contains("WRONGPASS")
                                || String.valueOf(e.getCause()).contains("WRONGPASS"),
                        String.valueOf(e));
                RedisURI right = RedisURI.builder()
                        .withHost("127.0.0.1")
                        .withPort(port)
                        .withAuthentication("acme", "s3cret".toCharArray())
                        .build();
                try (StatefulRedisConnection<String, String> ok = c.connect(right)) {
                    assertEquals("OK", ok.sync().set("k", "acme's"));
                    assertEquals("acme's", ok.sync().get("k"));
                }
            } finally {
                c.shutdown(0, 2, TimeUnit.SECONDS);
            }
        }
    }
}
