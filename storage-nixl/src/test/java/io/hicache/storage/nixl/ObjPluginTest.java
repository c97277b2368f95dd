package io.hicache.storage.nixl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.hicache.core.Deadline;
import io.hicache.storage.nixl.obj.ObjPlugin;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.XferOp;
import io.hicache.storage.s3.LocalS3;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The OBJ plugin against S3Proxy on 127.0.0.1: gathered PUTs, scattered and ranged GETs, and its failures. */
class ObjPluginTest {
    static final String BUCKET = "hicache-nixl-obj";

    @TempDir
    static Path dir;

    static LocalS3 server;

    private final Arena arena = Arena.ofShared();
    private NixlAgent agent;

    @BeforeAll
    static void startServer() throws Exception {
        server = new LocalS3(dir, BUCKET);
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    @AfterEach
    void close() {
        if (agent != null) {
            agent.close();
        }
        arena.close();
    }

    private NixlAgent agent() {
        agent = NixlAgent.create("obj-test", List.of(new ObjPlugin()));
        agent.createBackend(ObjPlugin.NAME, NixlPageStoreConformanceTest.objParams(server, BUCKET));
        return agent;
    }

    private MemorySegment pattern(long bytes, int seed) {
        MemorySegment s = arena.allocate(bytes);
        for (long i = 0; i < bytes; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + seed));
        }
        return s;
    }

    private static NixlStatus run(NixlAgent agent, XferRequest req) {
        agent.post(req);
        return agent.await(req, Deadline.after(Duration.ofSeconds(20)));
    }

    @Test
    void aGatheredPutReadsBackWholeAndByRanges() {
        NixlAgent a = agent();
        MemorySegment head = pattern(1000, 1);
        MemorySegment tail = pattern(3000, 2);
        Registration local = a.register(List.of(new MemoryRegion.Dram(head), new MemoryRegion.Dram(tail)));
        Registration obj = a.register(new MemoryRegion.Obj("t/gathered", 4000));
        assertEquals(
                NixlStatus.SUCCESS,
                run(
                        a,
                        a.createXfer(
                                XferOp.WRITE,
                                List.of(local.region(0).whole(), local.region(1).whole()),
                                List.of(
                                        obj.region(0).slice(0, 1000),
                                        obj.region(0).slice(1000, 3000)),
                                null)));
        assertEquals(
                List.of(true), a.queryMemory(List.of(obj.region(0).memory())).join());

        // Two pieces with a gap between them: one ranged GET scattered into both.
        MemorySegment x = arena.allocate(200);
        MemorySegment y = arena.allocate(500);
        Registration back = a.register(List.of(new MemoryRegion.Dram(x), new MemoryRegion.Dram(y)));
        XferRequest ranged = a.createXfer(
                XferOp.READ,
                List.of(back.region(1).whole(), back.region(0).whole()),
                List.of(obj.region(0).slice(2000, 500), obj.region(0).slice(900, 200)),
                null);
        assertEquals(NixlStatus.SUCCESS, run(a, ranged), ranged.errorDetail());
        assertArrayEquals(
                head.asSlice(900, 100).toArray(ValueLayout.JAVA_BYTE),
                x.asSlice(0, 100).toArray(ValueLayout.JAVA_BYTE));
        assertArrayEquals(
                tail.asSlice(0, 100).toArray(ValueLayout.JAVA_BYTE),
                x.asSlice(100, 100).toArray(ValueLayout.JAVA_BYTE));
        assertArrayEquals(tail.asSlice(1000, 500).toArray(ValueLayout.JAVA_BYTE), y.toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void partialWritesAreRefusedAndMissingOrWrongSizedObjectsTouchNothing() {
        NixlAgent a = agent();
        MemorySegment page = pattern(512, 3);
        Registration local = a.register(new MemoryRegion.Dram(page));
        Registration big = a.register(new MemoryRegion.Obj("t/partial", 1024));
        NixlException e = assertThrows(
                NixlException.class,
                () -> a.createXfer(
                        XferOp.WRITE,
                        List.of(local.region(0).whole()),
                        List.of(big.region(0).slice(0, 512)),
                        null));
        assertEquals(NixlStatus.ERR_INVALID_PARAM, e.status());

        Registration small = a.register(new MemoryRegion.Obj("t/small", 512));
        assertEquals(
                NixlStatus.SUCCESS,
                run(
                        a,
                        a.createXfer(
                                XferOp.WRITE,
                                List.of(local.region(0).whole()),
                                List.of(small.region(0).whole()),
                                null)));
        MemorySegment target = pattern(512, 9);
        byte[] before = target.toArray(ValueLayout.JAVA_BYTE);
        Registration into = a.register(new MemoryRegion.Dram(target));
        Registration wrongSize = a.register(new MemoryRegion.Obj("t/small", 600));
        assertEquals(
                NixlStatus.ERR_MISMATCH,
                run(
                        a,
                        a.createXfer(
                                XferOp.READ,
                                List.of(into.region(0).whole()),
                                List.of(wrongSize.region(0).slice(0, 512)),
                                null)));
        Registration missing = a.register(new MemoryRegion.Obj("t/missing", 512));
        assertEquals(
                NixlStatus.ERR_NOT_FOUND,
                run(
                        a,
                        a.createXfer(
                                XferOp.READ,
                                List.of(into.region(0).whole()),
                                List.of(missing.region(0).whole()),
                                null)));
        assertArrayEquals(before, target.toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void aPutThatFailsHalfwayLeavesNoObject() {
        NixlAgent a = agent();
        Arena doomed = Arena.ofShared();
        Registration local = a.register(
                List.of(new MemoryRegion.Dram(pattern(4096, 1)), new MemoryRegion.Dram(doomed.allocate(4096))));
        Registration obj = a.register(new MemoryRegion.Obj("t/half", 8192));
        XferRequest req = a.createXfer(
                XferOp.WRITE,
                List.of(local.region(0).whole(), local.region(1).whole()),
                List.of(obj.region(0).slice(0, 4096), obj.region(0).slice(4096, 4096)),
                null);
        doomed.close();
        NixlStatus status = run(a, req);
        assertEquals(NixlStatus.ERR_BACKEND, status, req.errorDetail());
        assertEquals(
                List.of(false), a.queryMemory(List.of(obj.region(0).memory())).join());
    }
}
