package io.hicache.transfer.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.testkit.ChildJvm;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.RequestState;
import io.hicache.transfer.TransferBatch;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferException;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.spi.TransferOp;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The transport conformance kit: a transport's test extends it and says which configuration selects the transport
 * ({@link #config}) and what name it must be chosen under ({@link #transportName}). Each case runs two engines in
 * this JVM (the remote one publishes a shared region, so every transport can reach it), except the kill case, whose
 * peer is a child JVM killed in the middle of a batch.
 *
 * <p>Every byte is checked: both sides start with distinct patterns, requests cover random disjoint ranges on both
 * sides, and after a batch each moved range equals its source while every other byte is unchanged.
 *
 * <p>JUnit makes one instance per case; the kit closes the engines, frees its memory and deletes its shared-memory
 * folder when the case ends.
 */
public abstract class TransportConformanceKit {
    private static final long REGION_BYTES = 32L << 20;
    private static final long REMOTE_SEED = 7;
    private static final long LOCAL_SEED = 11;

    private Path shmDir;
    private Arena arena;
    private TransferEngine local;
    private TransferEngine remote;
    private LocalRegion localRegion;
    private LocalRegion remoteRegion;
    private RemoteSegment segment;
    private SplittableRandom random;

    /** The configuration that makes an engine named {@code name} use the transport under test. */
    protected abstract TransferConfig config(String name, Path shmDir);

    /** The name the engine must choose for the peer. */
    protected abstract String transportName();

    /** Timeouts short enough for tests: 2 s slices, 500 ms connects, 200 ms heartbeats. */
    protected static TransferConfig testTimeouts(TransferConfig c) {
        return c.withTimeouts(2_000, 500, 200);
    }

    @BeforeEach
    final void open() throws IOException {
        shmDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-kit-xfer");
        arena = Arena.ofShared();
        random = new SplittableRandom(42);
        local = TransferEngine.open(config("kit-local", shmDir));
        remote = TransferEngine.open(config("kit-remote", shmDir));
        localRegion = local.register("local", arena.allocate(REGION_BYTES, 4096));
        remoteRegion = remote.registerShared("remote", REGION_BYTES);
        TransferPatterns.fill(localRegion.memory(), LOCAL_SEED);
        TransferPatterns.fill(remoteRegion.memory(), REMOTE_SEED);
        segment = local.openSegment(remote.address(), Duration.ofSeconds(10));
    }

    @AfterEach
    final void close() throws IOException {
        if (local != null) {
            local.close();
        }
        if (remote != null) {
            remote.close();
        }
        if (arena != null) {
            arena.close();
        }
        try (Stream<Path> files = Files.walk(shmDir)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    @Test
    void theTransportUnderTestIsChosen() {
        assertEquals(transportName(), segment.transport(), "transport chosen for a peer on this host");
        assertTrue(segment.alive());
    }

    @Test
    void randomBatchesBothWaysMoveEveryByte() throws Exception {
        for (int round = 0; round < 6; round++) {
            runVerified(0, REGION_BYTES, 40, round % 3 == 0 ? 4 << 20 : 300_000);
        }
    }

    @Test
    void concurrentBatchesOnDisjointRanges() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> futures = new ArrayList<>();
            long quarter = REGION_BYTES / 4;
            for (int t = 0; t < 4; t++) {
                long from = t * quarter;
                futures.add(pool.submit(() -> {
                    for (int round = 0; round < 4; round++) {
                        runVerified(from, quarter, 24, 700_000);
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                f.get(2, TimeUnit.MINUTES);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aSingleLargeRequestIsSlicedAndReassembled() throws Exception {
        MemorySegment target = localRegion.memory();
        TransferBatch batch = local.submit(
                segment, List.of(TransferRequest.read(target, "remote", 0)), Deadline.after(Duration.ofSeconds(30)));
        assertTrue(batch.await(Duration.ofSeconds(40)), "batch finished");
        assertEquals(RequestState.DONE, batch.state(0), batch.reason(0));
        assertTrue(TransferPatterns.matches(target, REMOTE_SEED, 0, REGION_BYTES), "32 MiB read intact");
    }

    @Test
    void cancelEndsEveryRequestAndLeavesDoneOnesIntact() throws Exception {
        List<TransferRequest> reqs = new ArrayList<>();
        long size = 256 << 10;
        for (long off = 0; off < REGION_BYTES; off += size) {
            reqs.add(TransferRequest.read(localRegion.memory().asSlice(off, size), "remote", off));
        }
        TransferBatch batch = local.submit(segment, reqs, Deadline.after(Duration.ofSeconds(30)));
        batch.cancel();
        assertTrue(batch.await(Duration.ofSeconds(10)), "a cancelled batch ends within the slice timeout");
        int cancelled = 0;
        for (int i = 0; i < batch.size(); i++) {
            RequestState s = batch.state(i);
            assertTrue(s == RequestState.DONE || s == RequestState.CANCELLED, "request " + i + " is " + s);
            if (s == RequestState.DONE) {
                assertTrue(TransferPatterns.matches(reqs.get(i).local(), REMOTE_SEED, i * size, REGION_BYTES));
            } else {
                cancelled++;
                assertNotNull(batch.reason(i));
            }
        }
        assertTrue(cancelled > 0, "a cancel right after submit stops some of 128 requests");
    }

    @Test
    void aPassedDeadlineTimesRequestsOut() throws Exception {
        List<TransferRequest> reqs = new ArrayList<>();
        for (int round = 0; round < 8; round++) {
            reqs.add(TransferRequest.write(localRegion.memory(), "remote", 0));
        }
        long start = System.nanoTime();
        TransferBatch batch = local.submit(segment, reqs, Deadline.afterNanos(1));
        assertTrue(batch.await(Duration.ofSeconds(10)), "a batch past its deadline ends");
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(millis < 2_000 + 1_000, "ended " + millis + " ms after submit; bound is one slice timeout");
        int timedOut = 0;
        for (int i = 0; i < batch.size(); i++) {
            assertTrue(batch.state(i) == RequestState.TIMED_OUT || batch.state(i) == RequestState.DONE);
            timedOut += batch.state(i) == RequestState.TIMED_OUT ? 1 : 0;
        }
        assertTrue(timedOut > 0, "a deadline already passed at submit times out most of 256 MiB of writes");
    }

    @Test
    void badRequestsFailAtOnceWithTheReason() throws Exception {
        MemorySegment unregistered = arena.allocate(4096);
        MemorySegment ok = localRegion.memory().asSlice(0, 4096);
        TransferBatch batch = local.submit(
                segment,
                List.of(
                        TransferRequest.read(ok, "no-such-region", 0),
                        TransferRequest.read(ok, "remote", REGION_BYTES - 100),
                        TransferRequest.write(unregistered, "remote", 0),
                        TransferRequest.read(ok, "remote", 8192)),
                Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(10)));
        assertEquals(RequestState.FAILED, batch.state(0));
        assertTrue(batch.reason(0).contains("no-such-region"), batch.reason(0));
        assertEquals(RequestState.FAILED, batch.state(1));
        assertTrue(batch.reason(1).contains("outside"), batch.reason(1));
        assertEquals(RequestState.FAILED, batch.state(2));
        assertTrue(batch.reason(2).contains("not inside a registered region"), batch.reason(2));
        assertEquals(RequestState.DONE, batch.state(3), "a good request in the same batch still runs");
        assertTrue(TransferPatterns.matches(ok, REMOTE_SEED, 8192, REGION_BYTES));
    }

    @Test
    void aRegionUnregisteredByItsOwnerRefusesRequests() throws Exception {
        List<TransferRequest> write =
                List.of(TransferRequest.write(localRegion.memory().asSlice(0, 4096), "remote", 0));
        TransferBatch before = local.submit(segment, write, Deadline.after(Duration.ofSeconds(10)));
        assertTrue(before.await(Duration.ofSeconds(10)));
        assertEquals(RequestState.DONE, before.state(0), "the region was in use (a transport may have mapped it)");
        remoteRegion.close();
        TransferBatch batch = local.submit(segment, write, Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(10)));
        assertEquals(RequestState.FAILED, batch.state(0), "a stale descriptor does not reach freed memory");
        assertTrue(remote.regions().isEmpty());
    }

    @Test
    void registrationsAreReleasedOnClose() throws Exception {
        Path file = remoteRegion.shmFile().orElseThrow();
        assertTrue(Files.exists(file));
        String address = remote.address();
        remote.close();
        assertTrue(remote.regions().isEmpty(), "no region left registered");
        assertFalse(Files.exists(file), "the shared region's file is deleted");
        assertThrows(TransferException.class, () -> remote.register("again", arena.allocate(64)));
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (segment.alive() && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertFalse(segment.alive(), "the peer of a closed engine is declared dead");
        TransferBatch batch = local.submit(
                segment,
                List.of(TransferRequest.read(localRegion.memory().asSlice(0, 4096), "remote", 0)),
                Deadline.after(Duration.ofSeconds(5)));
        assertTrue(batch.await(Duration.ofSeconds(5)));
        assertEquals(RequestState.FAILED, batch.state(0));
        assertThrows(TransferException.class, () -> local.openSegment(address, Duration.ofSeconds(2)));
        local.close();
        assertTrue(local.regions().isEmpty());
    }

    @Test
    void aPeerKilledMidBatchFailsTheRestWithinTheDeadline() throws Exception {
        long peerBytes = 512L << 20;
        long size = 1 << 20;
        TransferConfig childConfig = config("child", shmDir);
        ChildJvm child = ChildJvm.start(
                TransferPeerMain.class,
                List.of(
                        String.join(",", childConfig.transports()),
                        shmDir.toString(),
                        Long.toString(peerBytes),
                        "99",
                        TransferPeerMain.options(childConfig)));
        try {
            assertTrue(child.awaitLine("ready ", 60, TimeUnit.SECONDS), "child peer started");
            String address = child.lines().stream()
                    .filter(l -> l.startsWith("ready "))
                    .findFirst()
                    .orElseThrow()
                    .substring(6);
            RemoteSegment peer = local.openSegment(address, Duration.ofSeconds(10));
            assertEquals(transportName(), peer.transport());
            try (Arena big = Arena.ofShared()) {
                MemorySegment into = big.allocate(peerBytes, 4096);
                LocalRegion intoRegion = local.register("into", into);
                List<TransferRequest> reqs = new ArrayList<>();
                for (long off = 0; off < peerBytes; off += size) {
                    reqs.add(TransferRequest.read(into.asSlice(off, size), "peer", off));
                }
                long start = System.nanoTime();
                TransferBatch batch = local.submit(peer, reqs, Deadline.after(Duration.ofSeconds(20)));
                while (batch.doneCount() == 0 && !batch.isDone()) {
                    Thread.onSpinWait();
                }
                child.kill();
                long bound = TimeUnit.SECONDS.toNanos(2 + 1) + TimeUnit.MILLISECONDS.toNanos(3 * 200);
                assertTrue(batch.await(Duration.ofNanos(bound)), "batch ends within a slice timeout of the kill");
                long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                int failed = 0;
                for (int i = 0; i < batch.size(); i++) {
                    RequestState s = batch.state(i);
                    if (s == RequestState.DONE) {
                        assertTrue(
                                TransferPatterns.matches(reqs.get(i).local(), 99, i * size, peerBytes),
                                "a request reported done holds the peer's bytes");
                    } else {
                        assertEquals(RequestState.FAILED, s, "request " + i);
                        assertNotNull(batch.reason(i));
                        failed++;
                    }
                }
                assertTrue(
                        failed > 0,
                        "killing the peer after the first of 512 requests fails some (" + batch.doneCount()
                                + " done in " + millis + " ms)");
                TransferBatch after = local.submit(peer, List.of(reqs.get(0)), Deadline.after(Duration.ofSeconds(5)));
                assertTrue(after.await(Duration.ofSeconds(5)));
                assertEquals(RequestState.FAILED, after.state(0), "a dead peer fails new batches at once");
                intoRegion.close();
            }
        } finally {
            child.kill();
        }
    }

    /**
     * Runs one batch of {@code count} requests of up to {@code maxBytes} over random disjoint ranges of
     * {@code [from, from + span)} on both sides, half reads and half writes, and checks every byte of the span.
     */
    private void runVerified(long from, long span, int count, int maxBytes) throws Exception {
        MemorySegment localSpan = localRegion.memory().asSlice(from, span);
        MemorySegment remoteSpan = remoteRegion.memory().asSlice(from, span);
        MemorySegment localBefore;
        MemorySegment remoteBefore;
        try (Arena copies = Arena.ofConfined()) {
            localBefore = copies.allocate(span).copyFrom(localSpan);
            remoteBefore = copies.allocate(span).copyFrom(remoteSpan);
            List<long[]> ranges = disjointRanges(span, count, maxBytes);
            List<long[]> localRanges = new ArrayList<>(ranges);
            synchronized (random) {
                Collections.shuffle(localRanges, new Random(random.nextLong()));
            }
            // pair ranges of equal length: sort both by length so the i-th local and remote ranges match
            localRanges.sort(Comparator.comparingLong(r -> r[1]));
            ranges.sort(Comparator.comparingLong(r -> r[1]));
            List<TransferRequest> reqs = new ArrayList<>();
            List<TransferOp> ops = new ArrayList<>();
            for (int i = 0; i < ranges.size(); i++) {
                TransferOp op;
                synchronized (random) {
                    op = random.nextBoolean() ? TransferOp.READ : TransferOp.WRITE;
                }
                ops.add(op);
                MemorySegment l = localSpan.asSlice(localRanges.get(i)[0], ranges.get(i)[1]);
                reqs.add(new TransferRequest(op, l, "remote", from + ranges.get(i)[0]));
            }
            TransferBatch batch = local.submit(segment, reqs, Deadline.after(Duration.ofSeconds(60)));
            assertTrue(batch.await(Duration.ofSeconds(70)), "batch finished");
            MemorySegment localExpected = copies.allocate(span).copyFrom(localBefore);
            MemorySegment remoteExpected = copies.allocate(span).copyFrom(remoteBefore);
            for (int i = 0; i < reqs.size(); i++) {
                assertEquals(RequestState.DONE, batch.state(i), batch.reason(i));
                long lo = localRanges.get(i)[0];
                long ro = ranges.get(i)[0];
                long n = ranges.get(i)[1];
                if (ops.get(i) == TransferOp.READ) {
                    MemorySegment.copy(remoteBefore, ro, localExpected, lo, n);
                } else {
                    MemorySegment.copy(localBefore, lo, remoteExpected, ro, n);
                }
            }
            assertEquals(-1, localSpan.mismatch(localExpected), "local bytes after the batch");
            assertEquals(-1, remoteSpan.mismatch(remoteExpected), "remote bytes after the batch");
        }
    }

    /** Up to {@code count} disjoint {offset, length} ranges inside {@code span}, at random. */
    private List<long[]> disjointRanges(long span, int count, int maxBytes) {
        List<long[]> ranges = new ArrayList<>();
        long cursor = 0;
        synchronized (random) {
            for (int i = 0; i < count && cursor < span; i++) {
                long gap = random.nextInt(4096);
                long len = 1 + random.nextInt(maxBytes);
                if (cursor + gap + len > span) {
                    break;
                }
                ranges.add(new long[] {cursor + gap, len});
                cursor += gap + len;
            }
        }
        return ranges;
    }
}
