package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A deadline never turns a stored page into a miss, nor an unfinished removal into an acknowledgement: with pages only
 * in a slow L3 (it answers after 400 ms) and requests whose deadline is 50 ms, GET answers TIMED_OUT per page,
 * LEADING_HITS and CLEAR answer ERROR TIMED_OUT, DELETE answers TIMED_OUT for pages it could not remove, and those
 * pages are then still there.
 */
class DeadlinesTellTheTruthTest {
    private static final int PAGE_BYTES = 4096;
    private static final int PAGES = 24;
    private static final int DEADLINE_MILLIS = 50;

    private final String shared = "deadlines-" + UUID.randomUUID();
    private final Namespace ns = Pages.namespace("deadlines");
    private List<StoreKey> keys;
    private TestDaemon daemon;

    @BeforeEach
    void pagesOnlyInASlowL3() throws Exception {
        try (TestDaemon writer = TestDaemon.start(Map.of("server.store", "delaying", "delaying.shared", shared));
                RemotePageStore client = writer.client();
                Pages pages = new Pages()) {
            keys = pages.keys(ns, PAGES);
            PageBatch batch = pages.filled(keys, PAGE_BYTES);
            assertTrue(Pages.put(client, batch).allSucceeded());
        } // closing drains the write-behind: every page is in L3 now
        daemon = TestDaemon.start(
                Map.of("server.store", "delaying", "delaying.shared", shared, "delaying.delay", "400ms"));
    }

    @AfterEach
    void stop() throws Exception {
        if (daemon != null) {
            daemon.close();
        }
        DelayingPageStore.drop(shared);
    }

    @Test
    void aGetPastItsDeadlineAnswersTimedOutNotMiss() throws Exception {
        try (RawClient raw = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            raw.send(request(Wire.GET, 7, DEADLINE_MILLIS, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(keys.size());
                for (StoreKey k : keys) {
                    Codec.writeHash(b, k.hash());
                    b.writeInt(PAGE_BYTES);
                }
            }));
            RawClient.Frame f = raw.read();
            assertEquals(Wire.GET | Wire.RESPONSE, f.op(), "answered " + f);
            ByteBuffer p = f.payload();
            assertEquals(keys.size(), p.getInt());
            for (int i = 0; i < keys.size(); i++) {
                PageStatus s = Wire.status(p.get());
                p.getInt();
                p.getInt();
                assertEquals(PageStatus.TIMED_OUT, s, "page " + i + " exists in L3");
            }
        }
    }

    @Test
    void leadingHitsPastTheDeadlineIsAnErrorNotAShortCount() throws Exception {
        try (RawClient raw = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            raw.send(request(Wire.LEADING_HITS, 8, DEADLINE_MILLIS, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(keys.size());
                keys.forEach(k -> Codec.writeHash(b, k.hash()));
            }));
            RawClient.Frame f = raw.read();
            assertTrue(f.isError(), "a count after the deadline would be short: " + f);
            assertEquals(Wire.E_TIMED_OUT, f.errorCode(), message(f));
        }
    }

    @Test
    void aDeleteThatCouldNotRemoveAPageSaysSoAndThePageIsStillThere() throws Exception {
        List<StoreKey> half = keys.subList(0, PAGES / 2);
        try (RawClient raw = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            raw.send(request(Wire.DELETE, 9, DEADLINE_MILLIS, b -> {
                Codec.writeNamespace(b, ns);
                b.writeInt(half.size());
                half.forEach(k -> Codec.writeHash(b, k.hash()));
            }));
            RawClient.Frame f = raw.read();
            assertEquals(Wire.DELETE | Wire.RESPONSE, f.op(), "answered " + f);
            ByteBuffer p = f.payload();
            assertEquals(half.size(), p.getInt());
            for (int i = 0; i < half.size(); i++) {
                assertEquals(PageStatus.TIMED_OUT, Wire.status(p.get()), "page " + i + " is still in L3");
            }
        }
        try (RemotePageStore client = daemon.client()) {
            assertEquals(half.size(), Pages.stored(client, half), "pages not acknowledged as deleted are still there");
        }
    }

    @Test
    void aClearPastItsDeadlineSaysItIsPartial() throws Exception {
        try (RawClient raw = new RawClient(daemon.port()).hello(daemon.server.config.authToken())) {
            raw.send(request(Wire.CLEAR, 10, DEADLINE_MILLIS, b -> Codec.writeNamespace(b, ns)));
            RawClient.Frame f = raw.read();
            assertTrue(f.isError(), "an acknowledged clear must have happened: " + f);
            assertEquals(Wire.E_TIMED_OUT, f.errorCode(), message(f));
            assertTrue(message(f).contains("partial"), message(f));
        }
    }

    private interface Payload {
        void write(ByteBuf b);
    }

    private static byte[] request(byte op, long id, int timeoutMillis, Payload payload) {
        ByteBuf b = Unpooled.buffer();
        payload.write(b);
        byte[] body = ByteBufUtil.getBytes(b);
        return ByteBuffer.allocate(4 + Wire.HEADER_BYTES + body.length)
                .putInt(Wire.HEADER_BYTES + body.length)
                .put(op)
                .put((byte) 0)
                .putShort((short) 0)
                .putLong(id)
                .putInt(timeoutMillis)
                .put(body)
                .array();
    }

    private static String message(RawClient.Frame f) {
        ByteBuffer p = f.payload().duplicate();
        p.getShort();
        byte[] text = new byte[Short.toUnsignedInt(p.getShort())];
        p.get(text);
        return new String(text, StandardCharsets.UTF_8);
    }
}
