package io.hicache.bench.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.store.PageChecksum;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The server suite's load generator and protocols, against a daemon in this JVM (Redis is not needed here). */
class LoadGeneratorTest {
    @Test
    void respAnswersAreCountedInOrderWhateverHowTheBytesAreSplit() {
        byte[] stream = "+OK\r\n$5\r\nhello\r\n:1\r\n$0\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
        for (int cut = 1; cut < stream.length; cut++) {
            LoadProtocol.Decoder d = new RespProtocol().decoder();
            ByteBuf in = Unpooled.buffer();
            List<Long> ids = new ArrayList<>();
            for (int[] part : new int[][] {{0, cut}, {cut, stream.length}}) {
                in.writeBytes(stream, part[0], part[1] - part[0]);
                for (long id; in.isReadable() && (id = d.next(in)) != LoadProtocol.Decoder.INCOMPLETE; ) {
                    ids.add(id);
                }
                in.discardReadBytes();
            }
            assertEquals(List.of(0L, 1L, 2L, 3L), ids, "split at " + cut);
            assertEquals(0, in.readableBytes());
        }
        LoadProtocol.Decoder d = new RespProtocol().decoder();
        assertThrows(
                IllegalStateException.class, () -> d.next(Unpooled.copiedBuffer("$-1\r\n", StandardCharsets.US_ASCII)));
        assertThrows(
                IllegalStateException.class,
                () -> d.next(Unpooled.copiedBuffer("-ERR no\r\n", StandardCharsets.US_ASCII)));
    }

    @Test
    void memcachedAnswersAreCountedInOrderWhateverHowTheBytesAreSplit() {
        byte[] stream = ("VERSION 1.6.18\r\nSTORED\r\nDELETED\r\nVALUE 0a1b 0 5\r\nhe\r\no\r\nEND\r\nOK\r\n"
                        + "VALUE k 0 0\r\n\r\nEND\r\n")
                .getBytes(StandardCharsets.US_ASCII);
        for (int cut = 1; cut < stream.length; cut++) {
            LoadProtocol.Decoder d = new MemcacheProtocol().decoder();
            ByteBuf in = Unpooled.buffer();
            List<Long> ids = new ArrayList<>();
            for (int[] part : new int[][] {{0, cut}, {cut, stream.length}}) {
                in.writeBytes(stream, part[0], part[1] - part[0]);
                for (long id; in.isReadable() && (id = d.next(in)) != LoadProtocol.Decoder.INCOMPLETE; ) {
                    ids.add(id);
                }
                in.discardReadBytes();
            }
            assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L), ids, "split at " + cut);
            assertEquals(0, in.readableBytes());
        }
        for (String failure : List.of(
                "END\r\n",
                "ERROR\r\n",
                "CLIENT_ERROR bad data chunk\r\n",
                "SERVER_ERROR object too large for cache\r\n",
                "NOT_STORED\r\n",
                "NOT_FOUND\r\n")) {
            LoadProtocol.Decoder d = new MemcacheProtocol().decoder();
            assertThrows(
                    IllegalStateException.class,
                    () -> d.next(Unpooled.copiedBuffer(failure, StandardCharsets.US_ASCII)),
                    failure);
        }
    }

    @Test
    void memcachedRequestsAreItsTextProtocol() {
        MemcacheProtocol protocol = new MemcacheProtocol();
        LoadProtocol.PageKey key = LoadProtocol.PageKey.of(1, 2);
        String hex = new String(key.hexAscii(), StandardCharsets.US_ASCII);
        ByteBuf body = Unpooled.copiedBuffer("abc", StandardCharsets.US_ASCII);
        StringBuilder set = new StringBuilder();
        for (ByteBuf b : protocol.set(UnpooledByteBufAllocator.DEFAULT, 7, key, body, 0)) {
            set.append(b.toString(StandardCharsets.US_ASCII));
            b.release();
        }
        assertEquals("set " + hex + " 0 0 3\r\nabc\r\n", set.toString());
        ByteBuf get = protocol.get(UnpooledByteBufAllocator.DEFAULT, 8, key, 3);
        assertEquals("get " + hex + "\r\n", get.toString(StandardCharsets.US_ASCII));
        get.release();
        ByteBuf delete = protocol.delete(UnpooledByteBufAllocator.DEFAULT, 9, key);
        assertEquals("delete " + hex + "\r\n", delete.toString(StandardCharsets.US_ASCII));
        delete.release();
        ByteBuf flush = protocol.flushAll(UnpooledByteBufAllocator.DEFAULT, 9);
        assertEquals("flush_all\r\n", flush.toString(StandardCharsets.US_ASCII));
        flush.release();
    }

    @Test
    void theSameHostClientLeasesReservesCommitsAndPuts(@TempDir Path dir) throws Exception {
        Settings settings = Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "none")
                .flag("server.host-dir", dir.toString())
                .flag("server.host-size", "64MiB")
                .build();
        Namespace ns = HcwpProtocol.NAMESPACE;
        try (HiCacheServer server = HiCacheServer.start(ServerConfig.from(settings));
                SameHostClient client = new SameHostClient(server.port());
                Arena arena = Arena.ofConfined()) {
            int pageBytes = 64 * 1024;
            MemorySegment[] pages = new MemorySegment[3];
            byte[][] local = new byte[3][];
            byte[][] tcp = new byte[3][];
            for (int i = 0; i < 3; i++) {
                pages[i] = arena.allocate(pageBytes);
                pages[i].fill((byte) (i + 1));
                local[i] = LoadProtocol.PageKey.of(5, i).hash();
                tcp[i] = LoadProtocol.PageKey.of(6, i).hash();
            }
            client.putLocal(ns, local, pages);
            client.putTcp(ns, tcp, pages);
            for (byte[][] hashes : List.of(local, tcp)) {
                SameHostClient.Granted lease = client.lease(ns, hashes, pageBytes);
                for (int i = 0; i < 3; i++) {
                    assertEquals(
                            -1L,
                            client.slab.asSlice(lease.offsets()[i], pageBytes).mismatch(pages[i]),
                            "leased page " + i + " holds what was put");
                }
                assertTrue(client.release(lease.id()));
                assertTrue(!client.release(lease.id()), "a lease ends once");
            }
        }
    }

    @Test
    void setsGetsAndFlushesAgainstTheDaemon(@TempDir Path dir) throws Exception {
        Settings settings = Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "none")
                .flag("server.host-dir", dir.toString())
                .flag("server.host-size", "64MiB")
                .build();
        int pageBytes = 64 * 1024;
        ByteBuf body = Unpooled.directBuffer(pageBytes);
        for (int i = 0; i < pageBytes / 8; i++) {
            body.writeLong(0x9E3779B97F4A7C15L * (i + 1));
        }
        int crc = PageChecksum.of(MemorySegment.ofBuffer(body.nioBuffer()));
        HcwpProtocol protocol = new HcwpProtocol();
        try (HiCacheServer server = HiCacheServer.start(ServerConfig.from(settings));
                LoadGenerator load = LoadGenerator.connect(protocol, server.port(), 4, 3)) {
            PageCheck.verify("hicache", server.port(), load, protocol, body, crc);
            int pages = 200;
            LoadGenerator.Phase set = load.run(
                    pages,
                    (alloc, id, index) ->
                            protocol.set(alloc, id, LoadProtocol.PageKey.of(1, index), body.retainedDuplicate(), crc));
            LoadGenerator.Phase get = load.run(pages, (alloc, id, index) ->
                    new ByteBuf[] {protocol.get(alloc, id, LoadProtocol.PageKey.of(1, pages - 1 - index), pageBytes)});
            for (LoadGenerator.Phase p : List.of(set, get)) {
                assertEquals(pages, p.latencyNanos().length);
                assertTrue(
                        Arrays.stream(p.latencyNanos()).allMatch(n -> n > 0 && n <= p.nanos()),
                        "every request was answered within its phase");
            }
            load.run(1, (alloc, id, index) -> new ByteBuf[] {protocol.flushAll(alloc, id)});
            // After the flush the pages are gone: a get is an error the generator reports.
            ExecutionException missing = assertThrows(
                    ExecutionException.class,
                    () -> load.run(1, (alloc, id, index) ->
                            new ByteBuf[] {protocol.get(alloc, id, LoadProtocol.PageKey.of(1, 0), pageBytes)}));
            assertTrue(
                    String.valueOf(missing.getCause()).contains("page status 2"), String.valueOf(missing.getCause()));
        } finally {
            body.release();
        }
    }
}
