package io.hicache.storage.remote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.hicache.testkit.PagePattern;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The client's deadlines against a daemon that shakes hands and then answers late (a get, after 400 ms) or never:
 * calls complete promptly as TIMED_OUT or CANCELLED, and an answer that comes after the deadline never writes the
 * targets.
 */
class RemotePageStoreDeadlineTest {
    private static final int PAGE = 4096;
    private static final long ANSWER_DELAY_MILLIS = 400;

    private ServerSocketChannel listener;
    private Thread daemon;
    private final List<SocketChannel> accepted = new ArrayList<>();
    private Arena arena;

    @BeforeEach
    void startSlowDaemon() throws IOException {
        arena = Arena.ofShared();
        listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
        daemon = Thread.ofPlatform().daemon().name("slow-daemon").start(() -> {
            try {
                while (true) {
                    SocketChannel ch = listener.accept();
                    synchronized (accepted) {
                        accepted.add(ch);
                    }
                    Thread.ofPlatform().daemon().name("slow-daemon-connection").start(() -> serve(ch));
                }
            } catch (IOException closed) {
                // the test is over
            }
        });
    }

    @AfterEach
    void stop() throws Exception {
        listener.close();
        synchronized (accepted) {
            for (SocketChannel ch : accepted) {
                ch.close();
            }
        }
        daemon.join(5000);
        arena.close();
    }

    /** Answers HELLO at once, GET late (every page OK, with its pattern), and nothing else. */
    private static void serve(SocketChannel ch) {
        try (ch) {
            while (true) {
                ByteBuffer length = ByteBuffer.allocate(4);
                readFully(ch, length);
                ByteBuf frame = Unpooled.wrappedBuffer(
                        readFully(ch, ByteBuffer.allocate(length.getInt(0))).flip());
                int op = frame.readUnsignedByte();
                frame.skipBytes(3);
                long id = frame.readLong();
                frame.skipBytes(4);
                if (op == Wire.HELLO) {
                    ByteBuf out = Unpooled.buffer();
                    Codec.beginFrame(out, Wire.HELLO | Wire.RESPONSE, id, 0);
                    out.writeShort(Wire.VERSION_3).writeInt(4 << 20).writeInt(1 << 20);
                    Codec.writeString(out, "/nonexistent/slab");
                    out.writeByte(WireChecksum.CRC32C.code());
                    write(ch, Codec.endFrame(out));
                } else if (op == Wire.GET) {
                    Namespace ns = Codec.readNamespace(frame, Wire.VERSION_3);
                    int n = frame.readInt();
                    ByteBuf out = Unpooled.buffer();
                    Codec.beginFrame(out, Wire.GET | Wire.RESPONSE, id, 0);
                    out.writeInt(n);
                    List<MemorySegment> bodies = new ArrayList<>();
                    for (int i = 0; i < n; i++) {
                        StoreKey key = ns.key(Codec.readHash(frame));
                        MemorySegment page = Arena.ofAuto().allocate(frame.readInt());
                        PagePattern.fill(page, key);
                        out.writeByte(0).writeInt((int) page.byteSize()).writeInt(PageChecksum.of(page));
                        bodies.add(page);
                    }
                    for (MemorySegment page : bodies) {
                        out.writeBytes(page.asByteBuffer());
                    }
                    Thread.sleep(ANSWER_DELAY_MILLIS);
                    write(ch, Codec.endFrame(out));
                }
            }
        } catch (IOException | InterruptedException | RuntimeException closed) {
            // the client or the test closed the connection
        }
    }

    private static ByteBuffer readFully(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new IOException("closed");
            }
        }
        return b;
    }

    private static void write(SocketChannel ch, ByteBuf out) throws IOException {
        ByteBuffer b = out.nioBuffer();
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    private RemotePageStore client() {
        return RemotePageStore.open(RemoteStoreConfig.local(((InetSocketAddress) listenerAddress()).getPort(), ""));
    }

    private SocketAddress listenerAddress() {
        try {
            return listener.getLocalAddress();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private PageBatch sentinels(int n) {
        Namespace ns = Namespace.of("deadline-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        PageBatch.Builder b = PageBatch.builder(n);
        for (int i = 0; i < n; i++) {
            byte[] hash = new byte[PageHash.BYTES];
            hash[0] = (byte) i;
            MemorySegment page = arena.allocate(PAGE);
            PagePattern.fillSentinel(page);
            b.add(ns.key(PageHash.fromBytes(hash, 0)), page);
        }
        return b.build();
    }

    @Test
    void aGetAnsweredAfterItsDeadlineTimesOutAndLeavesItsTargetsAlone() throws Exception {
        try (RemotePageStore store = client()) {
            PageBatch targets = sentinels(3);
            long start = System.nanoTime();
            BatchResult got =
                    store.get(targets, Deadline.after(Duration.ofMillis(100))).get(5, TimeUnit.SECONDS);
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals(3, got.count(PageStatus.TIMED_OUT), got::toString);
            assertTrue(millis < ANSWER_DELAY_MILLIS, "the get took " + millis + " ms: it waited for the late answer");
            Thread.sleep(2 * ANSWER_DELAY_MILLIS); // the answer arrives now, and must be dropped
            for (int i = 0; i < 3; i++) {
                assertTrue(PagePattern.isSentinel(targets.page(i)), "a late answer wrote target " + i);
            }
            // With time enough, the same answer is delivered and verified.
            BatchResult late =
                    store.get(targets, Deadline.after(Duration.ofSeconds(5))).get(10, TimeUnit.SECONDS);
            assertEquals(3, late.count(PageStatus.OK), late::toString);
            assertEquals(-1, PagePattern.firstMismatch(targets.page(2), targets.key(2), 0));
        }
    }

    @Test
    void cancellingADeadlineEndsThePendingCallsPromptly() throws Exception {
        try (RemotePageStore store = client()) {
            Deadline deadline = Deadline.after(Duration.ofSeconds(30));
            var get = store.get(sentinels(2), deadline);
            var hits = store.leadingHits(sentinels(2).keys(), deadline);
            var put = store.put(sentinels(2), deadline);
            var clear = store.clear(sentinels(1).key(0).namespace(), deadline);
            Thread.sleep(50);
            long start = System.nanoTime();
            deadline.cancel();
            assertEquals(2, get.get(5, TimeUnit.SECONDS).count(PageStatus.CANCELLED));
            assertEquals(2, put.get(5, TimeUnit.SECONDS).count(PageStatus.CANCELLED));
            assertEquals(0, hits.get(5, TimeUnit.SECONDS));
            ExecutionException failed = assertThrows(ExecutionException.class, () -> clear.get(5, TimeUnit.SECONDS));
            assertTrue(
                    failed.getCause().getMessage().contains("CANCELLED"),
                    failed.getCause().getMessage());
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(millis < 300, "calls ended " + millis + " ms after the cancel");
        }
    }

    @Test
    void aDaemonThatCannotBeReachedFailsTheOpenClearly() throws Exception {
        int port = ((InetSocketAddress) listenerAddress()).getPort();
        listener.close();
        var e = assertThrows(HiCacheException.class, () -> RemotePageStore.open(RemoteStoreConfig.local(port, "")));
        assertEquals(ErrorCode.STORE_UNAVAILABLE, e.code());
        assertTrue(
                e.getMessage().contains("127.0.0.1:" + port) && e.getMessage().contains("connection refused"),
                e.getMessage());
    }
}
