package io.hicache.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.transfer.kit.TransferPatterns;
import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.SegmentDescriptor;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * How the engine treats device regions, without a GPU: {@link PretendDeviceTransport} stands in for a transport that
 * moves device memory (its "device" memory is host memory of this JVM). Requests go to the transport that moves
 * their pair of memory kinds, host transports never get a device region, and a pair nobody moves is refused with
 * the reason.
 */
class DeviceRegionRoutingTest {
    private static final long BYTES = 8L << 20;

    private final List<AutoCloseable> open = new ArrayList<>();
    private Path shmDir;
    private Arena arena;

    @BeforeEach
    void setUp() throws IOException {
        shmDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-routing");
        arena = Arena.ofShared();
        PretendDeviceTransport.SLICE_BYTES.clear();
        PretendDeviceTransport.SUBMISSIONS.clear();
        PretendDeviceTransport.REGISTERED.clear();
        PretendDeviceTransport.DEREGISTERED.clear();
    }

    @AfterEach
    void tearDown() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
        arena.close();
        try (Stream<Path> files = Files.walk(shmDir)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    private TransferEngine engine(String name, String... transports) {
        TransferEngine e = TransferEngine.open(TransferConfig.defaults(name)
                .withShmDir(shmDir)
                .withTransports(List.of(transports))
                .withTimeouts(2_000, 500, 200));
        open.add(e);
        return e;
    }

    private LocalRegion device(TransferEngine engine, String name, long seed) {
        MemorySegment memory = arena.allocate(BYTES, 4096);
        TransferPatterns.fill(memory, seed);
        return engine.registerDevice(name, memory.address(), BYTES);
    }

    /** An engine, its device and host regions, and its segment of a peer with both kinds, over shm and pretend-device. */
    private record Linked(TransferEngine engine, LocalRegion device, LocalRegion host, RemoteSegment segment) {}

    private Linked linkedOverShmAndTheDeviceTransport() {
        TransferEngine local = engine("local", PretendDeviceTransport.NAME, "shm");
        TransferEngine remote = engine("remote", PretendDeviceTransport.NAME, "shm");
        LocalRegion localDevice = device(local, "kv", 1);
        LocalRegion localHost = local.register("aux", arena.allocate(BYTES, 4096));
        device(remote, "kv", 2);
        remote.registerShared("aux", BYTES);
        RemoteSegment segment = local.openSegment(remote.address(), Duration.ofSeconds(10));
        return new Linked(local, localDevice, localHost, segment);
    }

    @Test
    void eachRequestGoesToTheTransportThatMovesItsKindsOfMemory() throws Exception {
        Linked pair = linkedOverShmAndTheDeviceTransport();

        assertEquals("shm", pair.segment().transport(), "host memory goes over shared memory");
        assertEquals(List.of("shm", PretendDeviceTransport.NAME), pair.segment().transports());
        assertEquals(
                Optional.of(PretendDeviceTransport.NAME),
                pair.segment().transportFor(MemoryKind.DEVICE, MemoryKind.DEVICE));
        assertEquals(Optional.empty(), pair.segment().transportFor(MemoryKind.HOST, MemoryKind.DEVICE));

        TransferBatch batch = pair.engine()
                .submit(
                        pair.segment(),
                        List.of(
                                TransferRequest.read(pair.device().memory().asSlice(0, BYTES), "kv", 0),
                                TransferRequest.read(pair.host().memory().asSlice(0, 1 << 20), "aux", 0)),
                        Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(15)));
        assertEquals(RequestState.DONE, batch.state(0), batch.reason(0));
        assertEquals(RequestState.DONE, batch.state(1), batch.reason(1));
        assertTrue(TransferPatterns.matches(pair.device().memory(), 2, 0, BYTES), "device bytes moved intact");
        assertEquals(
                List.of(BYTES),
                PretendDeviceTransport.SLICE_BYTES,
                "one device slice for an 8 MiB request (the transport asked for no slicing); none for host memory");
    }

    @Test
    void aLinkTakesItsSlicesOfOneSubmissionTogether() throws Exception {
        Linked pair = linkedOverShmAndTheDeviceTransport();
        List<TransferRequest> requests = new ArrayList<>();
        for (int i = 0; i < 5; i++) { // device and host requests interleaved
            requests.add(TransferRequest.read(pair.device().memory().asSlice(i * 65536L, 65536), "kv", i * 65536L));
            requests.add(TransferRequest.read(pair.host().memory().asSlice(i * 4096L, 4096), "aux", 0));
        }
        TransferBatch batch = pair.engine().submit(pair.segment(), requests, Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(15)));
        for (int i = 0; i < batch.size(); i++) {
            assertEquals(RequestState.DONE, batch.state(i), batch.reason(i));
        }
        assertEquals(List.of(5), PretendDeviceTransport.SUBMISSIONS, "the five device slices in one call, in order");
        assertEquals(List.of(65536L, 65536L, 65536L, 65536L, 65536L), PretendDeviceTransport.SLICE_BYTES);
        assertTrue(
                TransferPatterns.matches(pair.device().memory().asSlice(0, 5 * 65536L), 2, 0, BYTES),
                "device bytes moved intact");
    }

    @Test
    void aPairOfKindsNoLinkedTransportMovesIsRefusedWithTheReason() throws Exception {
        TransferEngine local = engine("local", PretendDeviceTransport.NAME, "tcp");
        TransferEngine remote = engine("remote", PretendDeviceTransport.NAME, "tcp");
        LocalRegion host = local.register("aux", arena.allocate(BYTES, 4096));
        LocalRegion localDevice = device(local, "kv", 1);
        device(remote, "kv", 2);
        remote.register("aux", arena.allocate(BYTES, 4096));
        RemoteSegment segment = local.openSegment(remote.address(), Duration.ofSeconds(10));

        TransferBatch batch = local.submit(
                segment,
                List.of(
                        TransferRequest.write(host.memory().asSlice(0, 4096), "kv", 0),
                        TransferRequest.write(localDevice.memory().asSlice(0, 4096), "aux", 0)),
                Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(15)));
        assertEquals(RequestState.FAILED, batch.state(0));
        assertTrue(batch.reason(0).contains("moves host memory to device memory"), batch.reason(0));
        assertEquals(RequestState.FAILED, batch.state(1));
        assertTrue(batch.reason(1).contains("moves device memory to host memory"), batch.reason(1));
        assertTrue(PretendDeviceTransport.SLICE_BYTES.isEmpty(), "nothing moved");
    }

    @Test
    void aPeerWithoutADeviceTransportCannotReachDeviceRegions() throws Exception {
        TransferEngine local = engine("local", "tcp");
        TransferEngine remote = engine("remote", PretendDeviceTransport.NAME, "tcp");
        LocalRegion host = local.register("aux", arena.allocate(BYTES, 4096));
        device(remote, "kv", 2);
        RemoteSegment segment = local.openSegment(remote.address(), Duration.ofSeconds(10));
        assertEquals(List.of("tcp"), segment.transports());
        TransferBatch batch = local.submit(
                segment,
                List.of(TransferRequest.read(host.memory().asSlice(0, 4096), "kv", 0)),
                Deadline.after(Duration.ofSeconds(10)));
        assertTrue(batch.await(Duration.ofSeconds(15)));
        assertEquals(RequestState.FAILED, batch.state(0), "tcp must not read device memory with the CPU");
        assertTrue(batch.reason(0).contains("from device memory"), batch.reason(0));
    }

    @Test
    void deviceRegionsAreRegisteredOnlyWithTransportsThatMoveThem() throws Exception {
        TransferEngine hostOnly = engine("host-only", "shm", "tcp");
        MemorySegment memory = arena.allocate(BYTES, 4096);
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class, () -> hostOnly.registerDevice("kv", memory.address(), BYTES));
        assertTrue(e.getMessage().contains("moves device memory"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> hostOnly.registerDevice("kv", 0, BYTES));

        TransferEngine both = engine("both", PretendDeviceTransport.NAME, "shm");
        LocalRegion kv = both.registerDevice("kv", memory.address(), BYTES);
        LocalRegion aux = both.register("aux", arena.allocate(4096, 4096));
        RegionDescriptor published = both.descriptor().region("kv").orElseThrow();
        assertEquals(MemoryKind.DEVICE, published.kind());
        assertEquals(
                Long.toString(memory.address()),
                published.keysOf(PretendDeviceTransport.NAME).get("address"));
        assertEquals(MemoryKind.DEVICE, kv.kind());
        kv.close();
        aux.close();
        assertEquals(
                List.of("kv", "aux"),
                PretendDeviceTransport.REGISTERED,
                "the device transport sees host regions too (it may ignore them)");
        assertEquals(List.of("kv", "aux"), PretendDeviceTransport.DEREGISTERED);
    }

    @Test
    void theDescriptorCarriesEachRegionsKind() {
        RegionDescriptor device = new RegionDescriptor("kv", 1, 4096, "", Map.of("x.y", "z"), MemoryKind.DEVICE);
        RegionDescriptor host = new RegionDescriptor("aux", 2, 4096, "/dev/shm/f", Map.of());
        SegmentDescriptor d =
                new SegmentDescriptor("e", "127.0.0.1:1", "h", 1, List.of("shm"), Map.of(), List.of(device, host));
        SegmentDescriptor back = SegmentDescriptor.decode(d.encode());
        assertEquals(d, back);
        assertEquals(MemoryKind.HOST, back.region("aux").orElseThrow().kind());
        assertThrows(
                IllegalArgumentException.class,
                () -> new RegionDescriptor("kv", 1, 4096, "/dev/shm/f", Map.of(), MemoryKind.DEVICE),
                "a device region is no shared-memory file");
    }
}
