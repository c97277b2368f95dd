package io.hicache.storage.nixl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.storage.nixl.posix.PosixPlugin;
import io.hicache.storage.nixl.spi.FileMode;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.XferOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/** The agent's own contract, with the POSIX plugin and a gated test plugin that holds transfers in progress. */
class NixlAgentTest {
    private static final EnumSet<FileMode> NEW_FILE = EnumSet.of(FileMode.CREATE, FileMode.WRITE, FileMode.ATOMIC);

    @TempDir
    Path dir;

    private final Arena arena = Arena.ofShared();
    private final GatedPlugin gated = new GatedPlugin();
    private final NixlAgent posix = NixlAgent.create("posix-agent", List.of(new PosixPlugin(), gated));
    private final NixlAgent held = NixlAgent.create("gated-agent", List.of(gated));

    NixlAgentTest() {
        posix.createBackend(PosixPlugin.NAME, Map.of("io_threads", "2"));
        held.createBackend("GATED", Map.of());
    }

    @AfterEach
    void close() {
        gated.open();
        posix.close();
        held.close();
        arena.close();
    }

    private MemorySegment pattern(long bytes, int seed) {
        MemorySegment s = arena.allocate(bytes, 64);
        for (long i = 0; i < bytes; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + seed * 7 + 1));
        }
        return s;
    }

    private static void assertStatus(NixlStatus expected, Executable call) {
        NixlException e = assertThrows(NixlException.class, call);
        assertEquals(expected, e.status(), e::getMessage);
    }

    @Test
    void registrationErrorsSayWhatIsWrongAndRegisterNothing() {
        NixlAgent bare = NixlAgent.create("bare", List.of(new PosixPlugin()));
        try {
            assertStatus(NixlStatus.ERR_NOT_SUPPORTED, () -> bare.register(new MemoryRegion.Dram(pattern(64, 1))));
        } finally {
            bare.close();
        }
        assertStatus(NixlStatus.ERR_NOT_FOUND, () -> posix.createBackend("GDS", Map.of()));
        assertStatus(
                NixlStatus.ERR_NOT_FOUND,
                () -> posix.register(new MemoryRegion.File(dir.resolve("no-such-folder/page"), NEW_FILE, 64)));
        assertStatus(
                NixlStatus.ERR_NOT_FOUND,
                () -> posix.register(new MemoryRegion.File(dir.resolve("missing"), EnumSet.of(FileMode.WRITE), 64)));
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> new MemoryRegion.Dram(MemorySegment.ofArray(new byte[64])));
        try (Arena confined = Arena.ofConfined()) {
            assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> new MemoryRegion.Dram(confined.allocate(64)));
        }
        assertStatus(
                NixlStatus.ERR_INVALID_PARAM,
                () -> new MemoryRegion.File(dir.resolve("f"), EnumSet.noneOf(FileMode.class), 64));
        // All or nothing: a bad region after a good one leaves no registration behind.
        assertStatus(
                NixlStatus.ERR_NOT_FOUND,
                () -> posix.register(List.of(
                        new MemoryRegion.Dram(pattern(64, 2)),
                        new MemoryRegion.File(dir.resolve("nope/f"), NEW_FILE, 64))));
        assertEquals(0, posix.registrationCount());

        Registration r = posix.register(new MemoryRegion.Dram(pattern(64, 3)));
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> r.region(0).slice(32, 33));
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> r.region(0).slice(-1, 8));
        XferDesc d = r.region(0).slice(0, 64);
        posix.deregister(r);
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> posix.deregister(r));
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> posix.prepDescList(List.of(d)));
        assertStatus(
                NixlStatus.ERR_INVALID_PARAM,
                () -> held.prepDescList(List.of(posix.register(new MemoryRegion.Dram(pattern(8, 4)))
                        .region(0)
                        .whole())));
    }

    @Test
    void preparedListsMoveScatteredDescriptorsBothWaysAndNotify() throws Exception {
        MemorySegment a = pattern(4096, 1);
        MemorySegment b = pattern(1000, 2);
        MemorySegment c = pattern(300, 3);
        Registration local =
                posix.register(List.of(new MemoryRegion.Dram(a), new MemoryRegion.Dram(b), new MemoryRegion.Dram(c)));
        Path file = dir.resolve("three");
        Registration storage = posix.register(new MemoryRegion.File(file, NEW_FILE, 5396));
        XferDescList l = posix.prepDescList(List.of(
                local.region(0).whole(),
                local.region(1).whole(),
                local.region(2).whole()));
        XferDescList s = posix.prepDescList(List.of(
                storage.region(0).slice(1300, 4096),
                storage.region(0).slice(0, 1000),
                storage.region(0).slice(1000, 300)));
        XferRequest write = posix.makeXfer(XferOp.WRITE, l, s, "written");
        assertEquals(NixlStatus.NOT_POSTED, posix.status(write));
        posix.post(write);
        assertEquals(NixlStatus.SUCCESS, posix.await(write, Deadline.after(Duration.ofSeconds(10))));
        assertEquals(List.of(new Notification("posix-agent", "written")), posix.notifications());
        assertEquals(5396, Files.size(file));

        // Read back a selection, crossed over: file's [0,1000) into a fresh buffer, [1300, 5396) into another.
        MemorySegment b2 = arena.allocate(1000);
        MemorySegment a2 = arena.allocate(4096);
        Registration back = posix.register(List.of(new MemoryRegion.Dram(b2), new MemoryRegion.Dram(a2)));
        Registration reader = posix.register(new MemoryRegion.File(file, EnumSet.of(FileMode.READ), 5396));
        XferDescList into = posix.prepDescList(
                List.of(back.region(0).whole(), back.region(1).whole()));
        XferDescList from = posix.prepDescList(List.of(
                reader.region(0).slice(0, 1000),
                reader.region(0).slice(1300, 4096),
                reader.region(0).slice(1000, 300)));
        XferRequest read = posix.makeXfer(XferOp.READ, into, new int[] {0, 1}, from, new int[] {0, 1}, null);
        posix.post(read);
        assertEquals(NixlStatus.SUCCESS, posix.await(read, Deadline.after(Duration.ofSeconds(10))));
        assertArrayEquals(b.toArray(ValueLayout.JAVA_BYTE), b2.toArray(ValueLayout.JAVA_BYTE));
        assertArrayEquals(a.toArray(ValueLayout.JAVA_BYTE), a2.toArray(ValueLayout.JAVA_BYTE));
        assertTrue(posix.notifications().isEmpty(), "no notification was asked for");
        // A read-only registration refuses writes when the transfer is made.
        assertStatus(
                NixlStatus.ERR_NOT_ALLOWED,
                () -> posix.createXfer(
                        XferOp.WRITE,
                        List.of(back.region(0).whole()),
                        List.of(reader.region(0).slice(0, 1000)),
                        null));
        assertStatus(
                NixlStatus.ERR_INVALID_PARAM,
                () -> posix.createXfer(
                        XferOp.READ,
                        List.of(back.region(0).whole()),
                        List.of(reader.region(0).slice(0, 999)),
                        null));
    }

    private XferRequest heldTransfer() {
        Registration local = held.register(new MemoryRegion.Dram(pattern(64, 9)));
        Registration storage = held.register(new MemoryRegion.File(dir.resolve("held"), NEW_FILE, 64));
        return held.createXfer(
                XferOp.WRITE,
                List.of(local.region(0).whole()),
                List.of(storage.region(0).whole()),
                null);
    }

    @Test
    void postingTwiceWhileInProgressIsRefusedAndRepostingAfterwardsWorks() {
        XferRequest req = heldTransfer();
        assertEquals(NixlStatus.IN_PROG, held.post(req));
        assertStatus(NixlStatus.ERR_REPOST_ACTIVE, () -> held.post(req));
        assertEquals(NixlStatus.IN_PROG, held.await(req, Deadline.after(Duration.ofMillis(50))));
        gated.open();
        assertEquals(NixlStatus.SUCCESS, held.await(req, Deadline.after(Duration.ofSeconds(10))));
        gated.close();
        held.post(req, "again", null);
        gated.open();
        assertEquals(NixlStatus.SUCCESS, held.await(req, Deadline.after(Duration.ofSeconds(10))));
        assertEquals(List.of(new Notification("gated-agent", "again")), held.notifications());
    }

    @Test
    void pollingAfterReleaseFailsClearly() {
        XferRequest req = heldTransfer();
        held.post(req);
        held.release(req); // in progress: cancelled, then released
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> held.status(req));
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> held.post(req));
        assertStatus(NixlStatus.ERR_INVALID_PARAM, () -> held.release(req));
        assertEquals(0, held.requestCount());
    }

    @Test
    void cancelAndStallTimeoutEndAPostThatWouldNeverFinish() {
        XferRequest req = heldTransfer();
        held.post(req);
        held.cancel(req);
        assertEquals(NixlStatus.ERR_CANCELED, held.await(req, Deadline.after(Duration.ofSeconds(10))));
        long start = System.nanoTime();
        held.post(req, null, Duration.ofMillis(100));
        assertEquals(NixlStatus.ERR_TIMED_OUT, held.await(req, Deadline.after(Duration.ofSeconds(10))));
        long tookMillis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(
                tookMillis >= 100 && tookMillis < 5_000,
                "stall timeout of 100 ms ended the post after " + tookMillis + " ms");
        assertTrue(req.errorDetail() != null);
    }

    @Test
    void aWriteThatFailsHalfwayLeavesNoHalfFileAndKeepsTheOldOne() throws Exception {
        Path file = dir.resolve("page");
        MemorySegment good = pattern(8192, 1);
        MemorySegment old = pattern(16384, 5);
        Files.write(file, old.toArray(ValueLayout.JAVA_BYTE));
        Arena doomed = Arena.ofShared();
        MemorySegment second = doomed.allocate(8192);
        Registration local = posix.register(List.of(new MemoryRegion.Dram(good), new MemoryRegion.Dram(second)));
        Registration storage = posix.register(new MemoryRegion.File(file, NEW_FILE, 16384));
        XferRequest req = posix.createXfer(
                XferOp.WRITE,
                List.of(local.region(0).whole(), local.region(1).whole()),
                List.of(storage.region(0).slice(0, 8192), storage.region(0).slice(8192, 8192)),
                null);
        doomed.close(); // the second descriptor's memory is gone: the write fails after the first landed
        posix.post(req);
        NixlStatus status = posix.await(req, Deadline.after(Duration.ofSeconds(10)));
        assertEquals(NixlStatus.ERR_BACKEND, status, req.errorDetail());
        assertArrayEquals(old.toArray(ValueLayout.JAVA_BYTE), Files.readAllBytes(file), "the old file must be intact");
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(List.of(file), files.toList(), "no temporary file may be left");
        }
        // Same with no old file: nothing appears.
        Files.delete(file);
        posix.post(req);
        assertEquals(NixlStatus.ERR_BACKEND, posix.await(req, Deadline.after(Duration.ofSeconds(10))));
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(List.of(), files.toList());
        }
    }

    @Test
    void readsOfMissingOrWrongSizedFilesFailWithoutTouchingTheTarget() throws Exception {
        Path shortFile = dir.resolve("short");
        Files.write(shortFile, new byte[100]);
        MemorySegment target = pattern(200, 7);
        byte[] before = target.toArray(ValueLayout.JAVA_BYTE);
        Registration local = posix.register(new MemoryRegion.Dram(target));
        for (Path p : List.of(shortFile, dir.resolve("missing"))) {
            Registration storage = posix.register(new MemoryRegion.File(p, EnumSet.of(FileMode.READ), 200));
            XferRequest req = posix.createXfer(
                    XferOp.READ,
                    List.of(local.region(0).whole()),
                    List.of(storage.region(0).whole()),
                    null);
            posix.post(req);
            NixlStatus expected = p == shortFile ? NixlStatus.ERR_MISMATCH : NixlStatus.ERR_NOT_FOUND;
            assertEquals(expected, posix.await(req, Deadline.after(Duration.ofSeconds(10))));
            assertArrayEquals(before, target.toArray(ValueLayout.JAVA_BYTE));
        }
    }

    @Test
    void closingReleasesEveryRegistrationAndRequest() {
        XferRequest req = heldTransfer();
        held.post(req);
        assertEquals(2, held.registrationCount());
        assertEquals(1, held.requestCount());
        held.close();
        assertEquals(0, held.registrationCount());
        assertEquals(0, held.requestCount());
        assertTrue(gated.backendClosed.get());
        assertStatus(NixlStatus.ERR_NOT_ALLOWED, () -> held.register(new MemoryRegion.Dram(pattern(8, 1))));
        held.close(); // idempotent
    }

    @Test
    void pluginsAreFoundAndChosenAsSglangDoes() {
        List<NixlPlugin> all = NixlPlugins.all();
        assertEquals(List.of("POSIX", "OBJ"), all.stream().map(NixlPlugin::name).toList());
        assertEquals("POSIX", NixlPlugins.choose(all, "auto", Map.of()).name());
        assertEquals("POSIX", NixlPlugins.choose(all, "posix", Map.of()).name());
        assertStatus(NixlStatus.ERR_NOT_FOUND, () -> NixlPlugins.choose(all, "3FS", Map.of()));
        if (System.getenv("AWS_DEFAULT_BUCKET") == null) {
            NixlException e = assertThrows(NixlException.class, () -> NixlPlugins.choose(all, "OBJ", Map.of()));
            assertTrue(e.getMessage().contains("no bucket"), e.getMessage());
            assertFalse(NixlPlugins.choose(List.of(all.get(1)), "OBJ", Map.of("s3.bucket", "b"))
                    .name()
                    .isEmpty());
        }
    }
}
