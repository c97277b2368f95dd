package io.hicache.transfer.ucx;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.kit.TransferPatterns;
import io.hicache.transfer.kit.TransferPeerMain;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The UCX transport's settings, and a dead peer seen by UCX itself rather than by the engine's heartbeats. */
class UcxTransportTest {
    @Test
    void settingsAreCheckedAndNamed() {
        UcxSettings d = UcxSettings.from(Map.of());
        assertEquals("all", d.tls());
        assertEquals(1, d.workers());
        assertFalse(d.sameHostOnly());
        assertTrue(UcxSettings.from(Map.of("tls", "sm")).sameHostOnly());
        assertTrue(UcxSettings.from(Map.of("tls", "posix,cma")).sameHostOnly());
        assertFalse(UcxSettings.from(Map.of("tls", "rc,sm")).sameHostOnly());
        IllegalArgumentException unknown =
                assertThrows(IllegalArgumentException.class, () -> UcxSettings.from(Map.of("tsl", "sm")));
        assertTrue(unknown.getMessage().contains("ucx.tsl"), unknown.getMessage());
        IllegalArgumentException badTls =
                assertThrows(IllegalArgumentException.class, () -> UcxSettings.from(Map.of("tls", "rc;sm")));
        assertTrue(badTls.getMessage().contains("ucx.tls"), badTls.getMessage());
        IllegalArgumentException badWorkers =
                assertThrows(IllegalArgumentException.class, () -> UcxSettings.from(Map.of("workers", "0")));
        assertTrue(badWorkers.getMessage().contains("ucx.workers"), badWorkers.getMessage());
        assertThrows(IllegalArgumentException.class, () -> UcxSettings.from(Map.of("spin-us", "x")));
        assertThrows(
                IllegalArgumentException.class,
                () -> TransferConfig.defaults("x").withTransportOption("no-prefix", "1"));
    }

    @Test
    void aBadOptionStopsTheEngineWithItsName() {
        UcxAvailable.assumeUcx();
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> TransferEngine.open(TransferConfig.defaults("bad")
                                .withTransports(List.of(UcxTransport.NAME))
                                .withTransportOption("ucx.workers", "100"))
                        .close());
        assertTrue(e.getMessage().contains("ucx.workers"), e.getMessage());
    }

    /**
     * Endpoints that fail while the peer lives (UCX's error handler, a failed request) are closed, their slices move
     * to new endpoints and still arrive, every byte, with their fences read again.
     */
    @Test
    void slicesOfAFailedEndpointRetryOnANewOne() throws Exception {
        UcxAvailable.assumeUcx();
        long bytes = 64L << 20;
        int size = 256 << 10;
        TransferConfig base = UcxAvailable.with(
                TransferConfig.defaults("retry-local")
                        .withTransports(List.of(UcxTransport.NAME))
                        .withTimeouts(5_000, 1_000, 200),
                UcxAvailable.SHM);
        try (TransferEngine local = TransferEngine.open(base);
                TransferEngine remote = TransferEngine.open(UcxAvailable.with(
                        TransferConfig.defaults("retry-remote").withTransports(List.of(UcxTransport.NAME)),
                        UcxAvailable.SHM));
                Arena arena = Arena.ofShared()) {
            LocalRegion into = local.register("into", arena.allocate(bytes, 4096));
            LocalRegion from = remote.register("from", arena.allocate(bytes, 4096));
            TransferPatterns.fill(from.memory(), 21);
            RemoteSegment peer = local.openSegment(remote.address(), Duration.ofSeconds(10));
            long retriedBefore = UcxLane.retried();
            for (int round = 0; round < 3; round++) {
                into.memory().fill((byte) 0);
                List<TransferRequest> reqs = new ArrayList<>();
                for (long off = 0; off < bytes; off += size) {
                    reqs.add(TransferRequest.read(into.memory().asSlice(off, size), "from", off));
                }
                TransferBatch batch = local.submit(peer, reqs, Deadline.after(Duration.ofSeconds(30)));
                while (batch.doneCount() < 8 && !batch.isDone()) {
                    Thread.onSpinWait();
                }
                UcxLink.failEndpointsForTest("broken by the test");
                assertTrue(batch.await(Duration.ofSeconds(30)), "the batch ends");
                for (int i = 0; i < batch.size(); i++) {
                    assertEquals(RequestState.DONE, batch.state(i), "request " + i + ": " + batch.reason(i));
                }
                assertTrue(TransferPatterns.matches(into.memory(), 21, 0, bytes), "every byte arrived, round " + round);
            }
            assertTrue(peer.alive());
            assertTrue(UcxLane.retried() > retriedBefore, "slices in flight were moved to a new endpoint");
        }
    }

    /**
     * Slices may take 20 s and a silent peer is declared dead only after 30 s; a peer killed in the middle of a batch
     * must still end the batch within seconds. Two things see the kill: the engine's control connection closing, and
     * UCX (its TCP connection resets; the endpoint's error handler and the failed requests report it): whichever is
     * first fails the batch, and UCX must have reported it too.
     */
    @Test
    void aKilledPeerIsSeenByTheEndpointErrorHandler() throws Exception {
        UcxAvailable.assumeUcx();
        long peerBytes = 256L << 20;
        int size = 1 << 20;
        TransferConfig config = UcxAvailable.with(
                TransferConfig.defaults("death-local")
                        .withTransports(List.of(UcxTransport.NAME))
                        .withTimeouts(20_000, 1_000, 10_000),
                UcxAvailable.TCP);
        Path shmDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-ucx-death");
        ChildJvm child = ChildJvm.start(
                TransferPeerMain.class,
                List.of(
                        UcxTransport.NAME,
                        shmDir.toString(),
                        Long.toString(peerBytes),
                        "13",
                        TransferPeerMain.options(config)));
        try (TransferEngine local = TransferEngine.open(config);
                Arena arena = Arena.ofShared()) {
            assertTrue(child.awaitLine("ready ", 60, TimeUnit.SECONDS), "child peer started");
            String address = child.lines().stream()
                    .filter(l -> l.startsWith("ready "))
                    .findFirst()
                    .orElseThrow()
                    .substring(6);
            RemoteSegment peer = local.openSegment(address, Duration.ofSeconds(10));
            MemorySegment into = arena.allocate(peerBytes, 4096);
            LocalRegion region = local.register("into", into);
            List<TransferRequest> reqs = new ArrayList<>();
            for (int round = 0; round < 4; round++) {
                for (long off = 0; off < peerBytes; off += size) {
                    reqs.add(TransferRequest.read(into.asSlice(off, size), "peer", off));
                }
            }
            TransferBatch batch = local.submit(peer, reqs, Deadline.after(Duration.ofSeconds(60)));
            while (batch.doneCount() == 0 && !batch.isDone()) {
                Thread.onSpinWait();
            }
            long failuresBefore = UcxTransport.peerFailures();
            child.kill();
            long killed = System.nanoTime();
            assertTrue(batch.await(Duration.ofSeconds(8)), "the batch ends within seconds of the kill, not 20 s");
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
            int failed = 0;
            for (int i = 0; i < batch.size(); i++) {
                if (batch.state(i) == RequestState.FAILED) {
                    failed++;
                    String reason = String.valueOf(batch.reason(i));
                    assertTrue(
                            reason.contains("ucx") || reason.contains("is dead"),
                            "request " + i + " failed for " + reason);
                }
            }
            assertTrue(failed > 0, "the kill failed requests (" + batch.doneCount() + " done, " + millis + " ms)");
            // the engine's control connection closing may fail the batch first; UCX must have seen the death too
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (UcxTransport.peerFailures() == failuresBefore && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertTrue(UcxTransport.peerFailures() > failuresBefore, "UCX's error path reported the dead peer");
            System.err.println("killed peer: " + failed + " of " + batch.size() + " failed " + millis
                    + " ms after the kill, first: " + batch.firstFailure());
            region.close();
        } finally {
            child.kill();
            try (Stream<Path> files = Files.list(shmDir)) { // the killed child's region file
                for (Path f : files.toList()) {
                    Files.deleteIfExists(f);
                }
            }
            Files.deleteIfExists(shmDir);
        }
    }
}
