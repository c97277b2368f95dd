package io.hicache.events.zmq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.KvEvent;
import io.hicache.core.events.KvEventBatch;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.KvEventPublishers;
import io.hicache.core.events.KvEventsConfig;
import io.hicache.core.events.Medium;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The publisher over real sockets on 127.0.0.1, with JeroMQ subscribers: frames, sequence numbers, topic, the replay
 * protocol and its end marker, opening by name, and a bind that fails.
 */
class ZmqPublisherTest {
    private static final String LOCAL = "tcp://127.0.0.1:*";

    private static KvEventsConfig config(String topic, int bufferSteps) {
        return KvEventsConfig.parse("{\"publisher\": \"zmq\", \"endpoint\": \"" + LOCAL + "\", \"replay_endpoint\": \""
                + LOCAL + "\", \"buffer_steps\": " + bufferSteps + ", \"topic\": \"" + topic + "\"}");
    }

    private static KvEventBatch batch(long id) {
        return new KvEventBatch(1.5, List.<KvEvent>of(new BlockRemoved(new long[] {id}, Medium.CPU)));
    }

    /** The block id of a one-event batch's payload. */
    private static long idIn(byte[] payload) throws Exception {
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
            assertEquals(3, u.unpackArrayHeader());
            assertEquals(1.5, u.unpackDouble());
            assertEquals(1, u.unpackArrayHeader());
            assertEquals(3, u.unpackArrayHeader());
            assertEquals("BlockRemoved", u.unpackString());
            assertEquals(1, u.unpackArrayHeader());
            long id = u.unpackLong();
            assertEquals("CPU_PINNED", u.unpackString());
            assertEquals(0, u.unpackInt(), "attn_dp_rank");
            return id;
        }
    }

    private static long seq(byte[] frame) {
        assertEquals(8, frame.length);
        return ByteBuffer.wrap(frame).getLong();
    }

    /**
     * A SUB socket that has received a batch: publishes until one arrives. A JeroMQ socket that connects sometimes
     * stalls in its handshake for good (JeroMQ issue 957; pyzmq's do not, see PythonSubscriberTest), so a socket that
     * got nothing in two seconds is replaced.
     */
    private static ZMQ.Socket subscribed(ZContext ctx, ZmqPublisher pub, long[] nextId, List<Long> firstSeq) {
        for (int attempt = 0; attempt < 10; attempt++) {
            ZMQ.Socket sub = ctx.createSocket(SocketType.SUB);
            sub.setLinger(0);
            sub.setReceiveTimeOut(50);
            sub.connect(pub.publishEndpoint());
            sub.subscribe("kv".getBytes(StandardCharsets.UTF_8));
            for (int i = 0; i < 40; i++) { // PUB drops what it sends before the subscription arrives
                pub.publish(batch(100 + nextId[0]++));
                byte[] topic = sub.recv();
                if (topic != null) {
                    assertArrayEquals("kv".getBytes(StandardCharsets.UTF_8), topic);
                    firstSeq.add(seq(sub.recv()));
                    try {
                        assertEquals(100 + firstSeq.getFirst(), idIn(sub.recv()), "batch n carries sequence number n");
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                    return sub;
                }
            }
            sub.close();
        }
        throw new AssertionError("no SUB socket got a batch in 10 tries");
    }

    /** The replay from {@code start}: (seq, payload) pairs, then the end marker, checked; retried as above. */
    private static List<Long> replay(ZContext ctx, ZmqPublisher pub, long start) throws Exception {
        for (int attempt = 0; attempt < 10; attempt++) {
            ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER);
            dealer.setLinger(0);
            dealer.setReceiveTimeOut(2_000);
            dealer.connect(pub.replayEndpoint().orElseThrow());
            dealer.sendMore(new byte[0]);
            dealer.send(ByteBuffer.allocate(8).putLong(start).array());
            List<Long> replayed = new ArrayList<>();
            byte[] delimiter = dealer.recv();
            if (delimiter == null) {
                dealer.close();
                continue;
            }
            while (true) {
                assertArrayEquals(new byte[0], delimiter, "the empty delimiter");
                byte[] s = dealer.recv();
                byte[] payload = dealer.recv();
                if (seq(s) == -1) {
                    assertArrayEquals(ZmqPublisher.END_OF_REPLAY, s);
                    assertEquals(0, payload.length, "the end marker's payload is empty");
                    dealer.close();
                    return replayed;
                }
                assertEquals(100 + seq(s), idIn(payload));
                replayed.add(seq(s));
                delimiter = dealer.recv();
            }
        }
        throw new AssertionError("no replay answer in 10 tries");
    }

    @Test
    void batchesGoOutAsTopicSequenceAndPayloadAndAReplayAnswersFromTheBuffer() throws Exception {
        try (ZmqPublisher pub = ZmqPublisher.open(config("kv", 3));
                ZContext ctx = new ZContext()) {
            assertTrue(pub.publishEndpoint().matches("tcp://127\\.0\\.0\\.1:\\d+"), pub.publishEndpoint());
            long[] nextId = {0};
            List<Long> firstSeq = new ArrayList<>();
            ZMQ.Socket sub = subscribed(ctx, pub, nextId, firstSeq);
            long first = firstSeq.getFirst();
            sub.setReceiveTimeOut(10_000);
            for (long n = first + 1; n < first + 5; n++) {
                pub.publish(batch(100 + nextId[0]++)); // batch k (from 0) carries block id 100 + k
                assertArrayEquals("kv".getBytes(StandardCharsets.UTF_8), sub.recv());
                assertEquals(n, seq(sub.recv()), "one sequence number per batch, none skipped");
                assertEquals(100 + n, idIn(sub.recv()));
                assertFalse(sub.hasReceiveMore(), "three frames");
            }
            long last = first + 4;
            assertEquals(
                    List.of(last - 2, last - 1, last),
                    replay(ctx, pub, 0),
                    "buffer_steps 3 keeps the last three batches");
            assertEquals(List.of(last), replay(ctx, pub, last));
            assertEquals(List.of(), replay(ctx, pub, last + 1), "nothing yet: only the end marker");
            assertTrue(pub.replaysAnswered() >= 3);
            assertEquals(0, pub.failures());
        }
    }

    @Test
    void itIsFoundByNameAndClosingIsFinal() {
        KvEventPublisher p = KvEventPublishers.open(config("", 10));
        try {
            ZmqPublisher zmq = assertInstanceOf(ZmqPublisher.class, p);
            assertNotNull(zmq.publishEndpoint());
            p.publish(new KvEventBatch(0, List.of(new AllBlocksCleared())));
        } finally {
            p.close();
        }
        p.close();
        assertThrows(IllegalStateException.class, () -> p.publish(batch(1)));
    }

    @Test
    void anEndpointThatCannotBeBoundFailsTheOpen() {
        try (ZmqPublisher first = ZmqPublisher.open(config("", 10))) {
            String taken = first.publishEndpoint(); // the replay socket always binds: here, on a port in use
            HiCacheException e = assertThrows(
                    HiCacheException.class,
                    () -> ZmqPublisher.open(KvEventsConfig.parse("{\"publisher\": \"zmq\", \"endpoint\": \"" + LOCAL
                            + "\", \"replay_endpoint\": \"" + taken + "\"}")));
            assertEquals(ErrorCode.TRANSFER_UNAVAILABLE, e.code());
            assertTrue(e.getMessage().contains(taken), e.getMessage());
        }
    }

    @Test
    void theBindRuleAndTheRankOffsetAreSglangs() {
        assertTrue(Endpoints.binds("tcp://*:5557"));
        assertTrue(Endpoints.binds("tcp://[::]:5557"));
        assertTrue(Endpoints.binds("tcp://0.0.0.0:5557"));
        assertTrue(Endpoints.binds("ipc:///tmp/kv"));
        assertTrue(Endpoints.binds("inproc://kv"));
        assertFalse(Endpoints.binds("tcp://router.local:5557"), "a named host is connected to");
        assertEquals("tcp://*:5557", Endpoints.forRank("tcp://*:5557", 0));
        assertEquals("tcp://*:5559", Endpoints.forRank("tcp://*:5557", 2));
        assertEquals("inproc://kv_dp1", Endpoints.forRank("inproc://kv", 1));
        assertThrows(IllegalArgumentException.class, () -> Endpoints.forRank("ipc:///tmp/kv", 1));
    }

    @Test
    void bindHostTakesTheWildcardsPlace() {
        KvEventsConfig c = KvEventsConfig.parse("{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:*\", "
                + "\"replay_endpoint\": \"tcp://*:*\", \"bind_host\": \"127.0.0.1\"}");
        try (ZmqPublisher pub = ZmqPublisher.open(c)) {
            assertTrue(pub.publishEndpoint().matches("tcp://127\\.0\\.0\\.1:\\d+"), pub.publishEndpoint());
            assertTrue(
                    pub.replayEndpoint().orElseThrow().matches("tcp://127\\.0\\.0\\.1:\\d+"),
                    pub.replayEndpoint().toString());
        }
        Optional<String> loopback = Optional.of("127.0.0.1");
        assertEquals("tcp://127.0.0.1:5557", Endpoints.onHost("tcp://*:5557", loopback));
        assertEquals("tcp://127.0.0.1:5557", Endpoints.onHost("tcp://0.0.0.0:5557", loopback));
        assertEquals("tcp://[::1]:5557", Endpoints.onHost("tcp://[::]:5557", Optional.of("::1")));
        assertEquals("tcp://10.0.0.2:5557", Endpoints.onHost("tcp://10.0.0.2:5557", loopback), "a definite host stays");
        assertEquals("tcp://*:5557", Endpoints.onHost("tcp://*:5557", Optional.empty()));
    }

    @Test
    void ipcIsRefusedWithWhatToUseInstead() {
        HiCacheException e = assertThrows(
                HiCacheException.class,
                () -> ZmqPublisher.open(
                        KvEventsConfig.parse("{\"publisher\": \"zmq\", \"endpoint\": \"ipc:///tmp/hicache-kv\"}")));
        assertTrue(e.getMessage().contains("ipc:///tmp/hicache-kv"), e.getMessage());
        assertTrue(e.getMessage().contains("\"bind_host\": \"127.0.0.1\""), e.getMessage());
        assertEquals(ErrorCode.CONFIG_INVALID, e.code());
    }
}
