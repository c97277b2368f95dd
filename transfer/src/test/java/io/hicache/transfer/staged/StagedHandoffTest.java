package io.hicache.transfer.staged;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageFormat;
import io.hicache.testkit.PagePattern;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Staged handoffs between two pools on the emulated device, through two transfer engines in this JVM: the path a
 * CUDA pool takes (device, staging, wire, staging, device), layer by layer.
 */
class StagedHandoffTest {
    private static final PageFormat FORMAT =
            new PageFormat(KvGeometry.mha(6, 2, 32, KvDtype.BFLOAT16), 4, HostLayout.PAGE_FIRST);
    private static final int POOL_PAGES = 40;
    private static final long SEED = 7_000;

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    private <T extends AutoCloseable> T keep(T c) {
        open.add(c);
        return c;
    }

    /** One side: its device, pool, engine and staging area. */
    private record Side(KvPool pool, TransferEngine engine, StagingArea staging) {}

    private Side side(String name, String transport, int stagingSlots) {
        EmulatedDeviceRuntime device = keep(new EmulatedDeviceRuntime(64L << 20, 2));
        KvPool pool = keep(device.createPool(FORMAT, POOL_PAGES));
        TransferEngine engine = keep(TransferEngine.open(
                TransferConfig.defaults(name).withTransports(List.of(transport)).withTimeouts(2_000, 500, 200)));
        StagingArea staging = keep(StagingArea.open(engine, "staging", device, FORMAT, stagingSlots));
        return new Side(pool, engine, staging);
    }

    @ParameterizedTest(name = "{0}, {1} bytes ahead")
    @CsvSource({"tcp, 67108864", "shm, 67108864", "tcp, 1", "shm, 1"})
    void everyLayerArrivesWithItsBytesAndBecomesUsableInOrder(String transport, long wireAheadBytes) throws Exception {
        Side prefill = side("prefill", transport, 16);
        Side decode = side("decode", transport, 24);
        int[] sourcePages = {3, 17, 5, 6, 7, 30, 31, 2, 39, 0, 11, 12};
        int[] targetPages = {9, 8, 20, 21, 22, 1, 4, 33, 34, 35, 36, 38};
        try (Arena arena = Arena.ofConfined()) {
            for (int page : sourcePages) {
                MemorySegment flat = arena.allocate(FORMAT.pageBytes());
                PagePattern.fill(flat, SEED + page);
                prefill.pool().writePage(page, flat);
            }
        }
        // Some slots taken on both sides, so that the runs of slots differ between them.
        prefill.staging().slots().allocate(3);
        decode.staging().slots().allocate(5);
        int[] sendSlots = prefill.staging().slots().allocate(sourcePages.length);
        int[] receiveSlots = decode.staging().slots().allocate(sourcePages.length);
        StagedReceive receive = new StagedReceive(decode.pool(), decode.staging(), receiveSlots, targetPages);
        decode.engine()
                .onMessage((from, payload) -> LayerArrival.decode(payload)
                        .filter(a -> a.handoff() == 42)
                        .ifPresent(a -> receive.layerArrived(a.layer())));
        int layers = FORMAT.geometry().layers();
        ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        for (int layer = 0; layer < layers; layer++) {
            int l = layer;
            receive.layers().layerDone(layer).thenRun(() -> {
                for (int i = 0; i < targetPages.length; i++) {
                    for (int earlier = 0; earlier <= l; earlier++) {
                        String bad = layerProblem(decode.pool(), targetPages[i], SEED + sourcePages[i], earlier);
                        if (bad != null) {
                            problems.add("layer " + l + " usable, but " + bad);
                        }
                    }
                }
            });
        }
        RemoteSegment peer = keep(prefill.engine().openSegment(decode.engine().address(), Duration.ofSeconds(5)));
        assertEquals(transport, peer.transport());
        AtomicInteger written = new AtomicInteger();
        StagedSend send = StagedSend.start(
                prefill.pool(),
                sourcePages,
                prefill.staging(),
                sendSlots,
                prefill.engine(),
                peer,
                decode.staging().region().name(),
                decode.staging().slab().slots(),
                receiveSlots,
                Deadline.after(Duration.ofSeconds(20)),
                layer -> {
                    written.incrementAndGet();
                    peer.send(new LayerArrival(42, layer).encode());
                },
                wireAheadBytes);
        send.done().get(20, TimeUnit.SECONDS);
        assertEquals(layers, written.get(), "every layer reported once");
        assertTrue(
                send.mostOnWire() >= 1 && send.mostOnWire() <= (wireAheadBytes == 1 ? 2 : layers),
                "layers on the wire at once: " + send.mostOnWire());
        assertTrue(receive.layers().await(Deadline.after(Duration.ofSeconds(20))), "every layer usable");
        assertEquals(0, receive.scattersInFlight(), "every scatter ended");
        assertEquals(List.of(), List.copyOf(problems));
        for (int i = 0; i < targetPages.length; i++) {
            for (int layer = 0; layer < layers; layer++) {
                assertNull(layerProblem(decode.pool(), targetPages[i], SEED + sourcePages[i], layer));
            }
        }
        // Staging slots are the caller's: nothing freed them behind its back.
        assertEquals(16 - 3 - sourcePages.length, prefill.staging().slots().available());
        assertEquals(24 - 5 - sourcePages.length, decode.staging().slots().available());
    }

    @Test
    void aWriteThePeerRefusesFailsTheHandoffAndNoLayerIsReported() throws Exception {
        Side prefill = side("prefill", "tcp", 8);
        Side decode = side("decode", "tcp", 8);
        RemoteSegment peer = keep(prefill.engine().openSegment(decode.engine().address(), Duration.ofSeconds(5)));
        AtomicInteger written = new AtomicInteger();
        // The peer's staging has 8 slots, but the sender is told 64: its offsets run past the region.
        StagedSend send = StagedSend.start(
                prefill.pool(),
                new int[] {1, 2},
                prefill.staging(),
                new int[] {0, 1},
                prefill.engine(),
                peer,
                decode.staging().region().name(),
                64,
                new int[] {40, 41},
                Deadline.after(Duration.ofSeconds(10)),
                layer -> written.incrementAndGet());
        ExecutionException e =
                assertThrows(ExecutionException.class, () -> send.done().get(20, TimeUnit.SECONDS));
        assertTrue(e.getCause().getMessage().contains("writing layer"), e::toString);
        assertEquals(0, written.get());
    }

    @Test
    void aPassedDeadlineSendsNothing() throws Exception {
        Side prefill = side("prefill", "tcp", 8);
        Side decode = side("decode", "tcp", 8);
        RemoteSegment peer = keep(prefill.engine().openSegment(decode.engine().address(), Duration.ofSeconds(5)));
        AtomicInteger written = new AtomicInteger();
        StagedSend send = StagedSend.start(
                prefill.pool(),
                new int[] {1},
                prefill.staging(),
                new int[] {0},
                prefill.engine(),
                peer,
                decode.staging().region().name(),
                8,
                new int[] {0},
                Deadline.expired(),
                layer -> written.incrementAndGet());
        ExecutionException e =
                assertThrows(ExecutionException.class, () -> send.done().get(20, TimeUnit.SECONDS));
        assertTrue(e.getCause().getMessage().contains("deadline"), e::toString);
        assertEquals(0, written.get());
    }

    @Test
    void badArgumentsAreRefusedBeforeAnythingMoves() {
        Side prefill = side("prefill", "tcp", 8);
        Side decode = side("decode", "tcp", 8);
        RemoteSegment peer = keep(prefill.engine().openSegment(decode.engine().address(), Duration.ofSeconds(5)));
        assertThrows(
                IllegalArgumentException.class,
                () -> StagedSend.start(
                        prefill.pool(),
                        new int[] {1, 2},
                        prefill.staging(),
                        new int[] {0},
                        prefill.engine(),
                        peer,
                        "staging",
                        8,
                        new int[] {0, 1},
                        Deadline.after(Duration.ofSeconds(1)),
                        layer -> {}));
        assertThrows(
                IllegalArgumentException.class,
                () -> StagedSend.start(
                        prefill.pool(),
                        new int[] {1},
                        prefill.staging(),
                        new int[] {0},
                        prefill.engine(),
                        peer,
                        "staging",
                        8,
                        new int[] {8},
                        Deadline.after(Duration.ofSeconds(1)),
                        layer -> {}));
        assertThrows(
                IllegalArgumentException.class,
                () -> new StagedReceive(decode.pool(), decode.staging(), new int[] {0, 1}, new int[] {0}));
        assertEquals(LayerArrival.decode(new byte[] {1, 2, 3}), Optional.empty());
        assertEquals(
                new LayerArrival(-5, 31),
                LayerArrival.decode(new LayerArrival(-5, 31).encode()).orElseThrow());
    }

    private static String layerProblem(KvPool pool, int page, long seed, int layer) {
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment actual = scratch.allocate(FORMAT.pageBytes());
            pool.readPage(page, actual);
            String bad = PagePattern.layerMismatch(FORMAT, actual, seed, layer);
            return bad == null ? null : "page " + page + ": " + bad;
        }
    }
}
