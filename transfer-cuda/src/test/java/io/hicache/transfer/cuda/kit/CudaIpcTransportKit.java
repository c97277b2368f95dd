package io.hicache.transfer.cuda.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.cuda.CudaProbe;
import io.hicache.testkit.ChildJvm;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.RequestState;
import io.hicache.transfer.TransferBatch;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferRequest;
import io.hicache.transfer.kit.TransferPatterns;
import io.hicache.transfer.spi.MemoryKind;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The cuda-ipc transport's kit, on a GPU: this JVM's engine (device region {@code local}) against a child JVM's
 * ({@link IpcPeerMain}, device region {@code kv}) on the same host, on device 0 for both, or the child on device 1
 * where there is a second GPU. Every byte is checked: the local side by reading its device memory back, the peer's by
 * a CRC-32C it computes from its own device memory against the kit's model of what it must hold. Skips where CUDA
 * cannot run (CI); {@code GpuRun --experiment pd} runs it on the GPU machine.
 *
 * <p>JUnit makes one instance per case; each case kills its child, closes its engine, frees its memory and deletes
 * its folder.
 */
public class CudaIpcTransportKit {
    private static final long BYTES = 32L << 20;
    private static final long LOCAL_SEED = 11;
    private static final long REMOTE_SEED = 7;

    private Path shmDir;
    private Arena arena;
    private ChildJvm child;
    private DeviceBuffer localMemory;
    private TransferEngine local;
    private LocalRegion localRegion;
    private RemoteSegment segment;

    @BeforeEach
    void open() throws Exception {
        Optional<String> why = CudaProbe.unavailableReason();
        Assumptions.assumeTrue(why.isEmpty(), () -> "needs CUDA: " + why.orElse(""));
        shmDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-kit-ipc");
        arena = Arena.ofShared();
        child = IpcPeer.start(shmDir, BYTES, REMOTE_SEED);
        localMemory = DeviceBuffer.allocate(0, BYTES);
        MemorySegment pattern = arena.allocate(BYTES, 4096);
        TransferPatterns.fill(pattern, LOCAL_SEED);
        localMemory.upload(pattern, 0);
        local = TransferEngine.open(TransferConfig.defaults("kit-local")
                .withShmDir(shmDir)
                .withTransports(List.of("cuda-ipc", "shm"))
                .withTimeouts(2_000, 1_000, 500));
        localRegion = local.registerDevice("local", localMemory.address(), BYTES);
        local.registerShared("aux", 4096);
        segment = local.openSegment(IpcPeer.address(child), Duration.ofSeconds(10));
    }

    @AfterEach
    void close() throws Exception {
        if (local != null) {
            local.close();
        }
        if (child != null) {
            child.kill();
        }
        if (localMemory != null) {
            localMemory.close();
        }
        if (arena != null) {
            arena.close();
        }
        if (shmDir != null) {
            try (Stream<Path> files = Files.walk(shmDir)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    @Test
    void cudaIpcCarriesDeviceMemoryAndSharedMemoryTheRest() {
        assertEquals(Optional.of("cuda-ipc"), segment.transportFor(MemoryKind.DEVICE, MemoryKind.DEVICE));
        assertEquals("shm", segment.transport());
        assertTrue(segment.alive());
    }

    @Test
    void aWholeRegionReadIsIntact() throws Exception {
        run(List.of(TransferRequest.read(localRegion.memory(), "kv", 0)));
        assertTrue(TransferPatterns.matches(download(), REMOTE_SEED, 0, BYTES), "32 MiB read intact");
    }

    @Test
    void randomBatchesBothWaysMoveEveryByte() throws Exception {
        MemorySegment localModel = arena.allocate(BYTES, 4096);
        MemorySegment remoteModel = arena.allocate(BYTES, 4096);
        TransferPatterns.fill(localModel, LOCAL_SEED);
        TransferPatterns.fill(remoteModel, REMOTE_SEED);
        SplittableRandom random = new SplittableRandom(42);
        for (int round = 0; round < 5; round++) {
            List<TransferRequest> requests = new ArrayList<>();
            // disjoint ranges on each side: 32 slots of 1 MiB, each request inside one slot, slots shuffled per side
            int slots = 32;
            long slot = BYTES / slots;
            List<Integer> remoteSlots = shuffled(slots, random);
            for (int i = 0; i < slots; i++) {
                long length = 1 + random.nextLong(slot);
                long localOff = i * slot + random.nextLong(slot - length + 1);
                long remoteOff = remoteSlots.get(i) * slot + random.nextLong(slot - length + 1);
                MemorySegment from = localRegion.memory().asSlice(localOff, length);
                if (random.nextBoolean()) {
                    requests.add(TransferRequest.write(from, "kv", remoteOff));
                    MemorySegment.copy(localModel, localOff, remoteModel, remoteOff, length);
                } else {
                    requests.add(TransferRequest.read(from, "kv", remoteOff));
                    MemorySegment.copy(remoteModel, remoteOff, localModel, localOff, length);
                }
            }
            run(requests);
            assertEquals(-1L, download().mismatch(localModel), "round " + round + ": local device bytes");
            assertEquals(
                    IpcPeerMain.crc(remoteModel),
                    Long.parseLong(IpcPeer.ask(child, "crc 0 " + BYTES, "crc")),
                    "round " + round + ": the peer's device bytes");
        }
    }

    @Test
    void requestsOutsideTheRegionOrFromHostMemoryFailAtOnce() throws Exception {
        LocalRegion host = local.register("host", arena.allocate(1 << 20, 4096));
        TransferBatch batch = local.submit(
                segment,
                List.of(
                        TransferRequest.write(localRegion.memory().asSlice(0, 4096), "kv", BYTES - 100),
                        TransferRequest.write(host.memory().asSlice(0, 4096), "kv", 0)),
                Deadline.after(Duration.ofSeconds(5)));
        assertTrue(batch.await(Duration.ofSeconds(10)));
        assertEquals(RequestState.FAILED, batch.state(0));
        assertTrue(batch.reason(0).contains("outside region"), batch.reason(0));
        assertEquals(RequestState.FAILED, batch.state(1));
        assertTrue(batch.reason(1).contains("moves host memory to device memory"), batch.reason(1));
    }

    @Test
    void unregisteringARegionRevokesThePeersMappingPromptly() throws Exception {
        run(List.of(TransferRequest.write(localRegion.memory().asSlice(0, 1 << 20), "kv", 0)));
        long millis = Long.parseLong(IpcPeer.ask(child, "unregister", "unregistered"));
        assertTrue(millis < 1_500, "the mapping was given back in " + millis + " ms, not at the 2 s timeout");
        TransferBatch batch = local.submit(
                segment,
                List.of(TransferRequest.write(localRegion.memory().asSlice(0, 4096), "kv", 0)),
                Deadline.after(Duration.ofSeconds(5)));
        assertTrue(batch.await(Duration.ofSeconds(10)));
        assertEquals(RequestState.FAILED, batch.state(0), "a write into an unregistered region");
        assertTrue(batch.reason(0).contains("unregistered"), batch.reason(0));
    }

    @Test
    void closingThisEngineEndsItsConnectionsAtThePeer() throws Exception {
        run(List.of(TransferRequest.write(localRegion.memory().asSlice(0, 4096), "kv", 0)));
        assertTrue(Integer.parseInt(IpcPeer.ask(child, "inbound kit-local", "inbound")) >= 2, "control and cuda-ipc");
        local.close();
        local = null;
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        int left;
        do {
            left = Integer.parseInt(IpcPeer.ask(child, "inbound kit-local", "inbound"));
        } while (left > 0 && System.nanoTime() - until < 0);
        assertEquals(0, left, "no connection of the closed engine is left at the peer");
    }

    @Test
    void killingThePeerMidStreamEndsEveryRequestAndLeavesThisProcessWorking() throws Exception {
        List<TransferBatch> batches = new ArrayList<>();
        Thread killer = Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(200);
                child.kill();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() - until < 0 && (killer.isAlive() || batches.size() < 3)) {
            List<TransferRequest> writes = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                writes.add(TransferRequest.write(
                        localRegion.memory().asSlice(i * (1L << 20), 1 << 20), "kv", i * (1L << 20)));
            }
            batches.add(local.submit(segment, writes, Deadline.after(Duration.ofSeconds(5))));
        }
        killer.join();
        int failed = 0;
        for (TransferBatch b : batches) {
            assertTrue(b.await(Duration.ofSeconds(10)), "every batch ends after the peer died");
            for (int i = 0; i < b.size(); i++) {
                RequestState s = b.state(i);
                assertTrue(s == RequestState.DONE || s == RequestState.FAILED || s == RequestState.TIMED_OUT, "" + s);
                failed += s == RequestState.DONE ? 0 : 1;
            }
        }
        assertTrue(failed > 0, "requests after the kill fail (of " + batches.size() + " batches)");
        localMemory.synchronize();
        assertTrue(
                TransferPatterns.matches(download(), LOCAL_SEED, 0, BYTES),
                "this process's device memory is " + "intact and its context usable");
        // a new peer is reachable as before
        child = IpcPeer.start(shmDir, BYTES, REMOTE_SEED);
        segment = local.openSegment(IpcPeer.address(child), Duration.ofSeconds(10));
        run(List.of(TransferRequest.read(localRegion.memory(), "kv", 0)));
        assertTrue(TransferPatterns.matches(download(), REMOTE_SEED, 0, BYTES), "read from a new peer intact");
    }

    private void run(List<TransferRequest> requests) throws InterruptedException {
        TransferBatch batch = local.submit(segment, requests, Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(15)), "batch finished");
        for (int i = 0; i < batch.size(); i++) {
            assertEquals(RequestState.DONE, batch.state(i), batch.reason(i));
        }
    }

    private MemorySegment download() {
        MemorySegment host = arena.allocate(BYTES, 4096);
        localMemory.download(host, 0);
        return host;
    }

    private static List<Integer> shuffled(int n, SplittableRandom random) {
        List<Integer> list = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            list.add(i);
        }
        Collections.shuffle(list, new Random(random.nextLong()));
        return list;
    }
}
