package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.PretendDeviceTransport;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.staged.StagingArea;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Prefill and decode ranks whose pools no transport reaches, in this JVM: every page goes through both staging areas
 * layer by layer (the path of CUDA pools). The pools are on the emulated device, whose memory the test reads to check
 * the bytes, but the ranks never register it: they stage.
 */
class StagedPdHandoffTest {
    private static final KvGeometry MODEL = PdHandoffTest.MODEL;
    private static final PdConfig FAST = PdHandoffTest.FAST;

    private final List<AutoCloseable> open = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
        arena.close();
    }

    private <T extends AutoCloseable> T keep(T c) {
        open.add(c);
        return c;
    }

    /** A rank's engine, pool (never registered), staging area and aux region. */
    record Node(TransferEngine engine, RankSpec spec, KvPool pool, StagingArea staging, LocalRegion aux) {
        MemorySegment memory() {
            return pool.hostVisibleMemory().orElseThrow(); // the test's view only
        }
    }

    /** A node whose engine has {@code transports} (comma-separated, in order of preference). */
    private Node node(String name, String transports, int tp, int rank, int stagingSlots) {
        TransferEngine e = keep(TransferEngine.open(TransferConfig.defaults(name)
                .withTransports(List.of(transports.split(",")))
                .withTimeouts(2_000, 500, 200)));
        RankSpec spec = new RankSpec(MODEL, 4, tp, rank, 32, 8, 64, e.address()).withStaging(stagingSlots);
        EmulatedDeviceRuntime device = keep(new EmulatedDeviceRuntime(16L << 20, 2));
        KvPool pool = keep(device.createPool(spec.format(), spec.kvPages()));
        StagingArea staging = keep(StagingArea.open(e, RankSpec.STAGING_REGION, device, spec.format(), stagingSlots));
        LocalRegion aux = e.registerShared(RankSpec.AUX_REGION, spec.auxBytes()); // shared: shm reaches every region
        return new Node(e, spec, pool, staging, aux);
    }

    private static void await(Supplier<Boolean> condition, long millis, Supplier<String> what) throws Exception {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!condition.get()) {
            if (System.nanoTime() > until) {
                throw new AssertionError("timed out waiting: " + what.get());
            }
            Thread.sleep(5);
        }
    }

    @ParameterizedTest(name = "{0}, tp {1}")
    @CsvSource({"tcp, 1", "shm, 1", "tcp, 2"})
    void chunksGoThroughBothStagingAreasLayerByLayer(String transport, int tp) throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, tp));
        long room = 31;
        int positions = 10;
        int prefix = 2;
        int[] srcPages = {1, 2, 3, 4, 8, 7, 12, 13, 14, 15};
        int[] dstPages = {30, 3, 4, 5, 6, 9, 10, 11, 20, 21};
        List<Node> prefillNodes = new ArrayList<>();
        List<KvSender> senders = new ArrayList<>();
        for (int r = 0; r < tp; r++) {
            Node p = node("prefill-" + r, transport, tp, r, 6); // fewer slots than the request: slots are reused
            prefillNodes.add(p);
            KvPatterns.fill(p.spec(), p.memory(), room, srcPages, 0, positions);
            keep(PrefillRank.startStaged(p.engine(), p.spec(), p.pool(), p.staging(), p.aux(), boot.url(), FAST));
        }
        List<Node> decodeNodes = new ArrayList<>();
        List<KvReceiver> receivers = new ArrayList<>();
        for (int r = 0; r < tp; r++) {
            Node d = node("decode-" + r, transport, tp, r, 12);
            decodeNodes.add(d);
            d.staging().slots().allocate(3); // the decode's slots do not line up with the prefill's
            DecodeRank rank = keep(DecodeRank.startStaged(d.engine(), d.spec(), d.pool(), d.staging(), d.aux(), FAST));
            KvReceiver rec = rank.receiver(room, boot.url());
            rec.init(dstPages, 5, prefix);
            receivers.add(rec);
        }
        PrefillRank[] ranks = open.stream()
                .filter(PrefillRank.class::isInstance)
                .map(PrefillRank.class::cast)
                .toArray(PrefillRank[]::new);
        for (PrefillRank p : ranks) {
            KvSender s = p.sender(room);
            await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "prefill waiting, is " + s.poll());
            senders.add(s);
        }
        byte[] aux = "first-token=7".getBytes();
        for (KvSender s : senders) {
            s.send(new int[] {1, 2, 3, 4}, false, null);
            s.send(new int[] {8, 7, 12}, false, null);
            s.send(new int[] {13, 14, 15}, true, aux);
        }
        for (KvReceiver rec : receivers) {
            await(() -> rec.poll().isFinal(), 10_000, () -> "decode final");
            assertEquals(KvPoll.SUCCESS, rec.poll(), rec.failureReason());
        }
        for (KvSender s : senders) {
            await(() -> s.poll().isFinal(), 5_000, () -> "prefill final");
            assertEquals(KvPoll.SUCCESS, s.poll(), s.failureReason());
        }
        for (Node d : decodeNodes) {
            // SUCCESS comes only after every layer was scattered: the bytes are there when the decode sees it.
            assertTrue(
                    KvPatterns.matches(d.spec(), d.memory(), room, dstPages, prefix, positions),
                    "every sent page holds every layer the prefill computed");
            for (int i = 0; i < prefix; i++) {
                assertFalse(
                        KvPatterns.matches(d.spec(), d.memory(), room, dstPages, i, i + 1),
                        "prefix page " + i + " was not sent");
            }
            byte[] got = d.aux().memory().asSlice(5L * 64, aux.length).toArray(ValueLayout.JAVA_BYTE);
            assertArrayEquals(aux, got);
            assertEquals(12 - 3, d.staging().slots().available(), "the room gave its staging slots back");
        }
        for (Node p : prefillNodes) {
            await(() -> p.staging().slots().available() == 6, 5_000, () -> "prefill staging slots back");
        }
    }

    @Test
    void anAbortMidTransferWaitsForWritesAndScattersThenGivesTheSlotsBack() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        Node p = node("prefill", "tcp", 1, 0, 8);
        PrefillRank prefill =
                keep(PrefillRank.startStaged(p.engine(), p.spec(), p.pool(), p.staging(), p.aux(), boot.url(), FAST));
        Node d = node("decode", "tcp", 1, 0, 8);
        DecodeRank rank = keep(DecodeRank.startStaged(d.engine(), d.spec(), d.pool(), d.staging(), d.aux(), FAST));
        KvReceiver rec = rank.receiver(5, boot.url());
        rec.init(new int[] {1, 2, 3, 4}, 0, 0);
        KvSender s = prefill.sender(5);
        await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "waiting");
        await(() -> d.staging().slots().available() == 4, 5_000, () -> "the decode took 4 staging slots");
        s.send(new int[] {1, 2}, false, null);
        Boolean released = rec.abort().get(10, TimeUnit.SECONDS);
        assertTrue(released, "released once the prefill drained its writes and the decode its scatters");
        assertEquals(KvPoll.FAILED, rec.poll());
        assertEquals(8, d.staging().slots().available(), "the aborted room's staging slots came back");
        await(() -> s.poll() == KvPoll.FAILED, 5_000, () -> "prefill failed");
        s.send(new int[] {3, 4}, true, new byte[8]); // ignored
        rec.close();
        s.close();
        await(() -> rank.activeRooms() == 0 && prefill.activeRooms() == 0, 5_000, () -> "rooms forgotten");
        await(() -> p.staging().slots().available() == 8, 5_000, () -> "prefill staging slots back");
    }

    @Test
    void aRoomWaitsForStagingSlotsAndOneLargerThanTheAreaFails() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        Node p = node("prefill", "tcp", 1, 0, 3); // smaller than a chunk: chunks go in pieces
        PrefillRank prefill =
                keep(PrefillRank.startStaged(p.engine(), p.spec(), p.pool(), p.staging(), p.aux(), boot.url(), FAST));
        Node d = node("decode", "tcp", 1, 0, 6);
        DecodeRank rank = keep(DecodeRank.startStaged(d.engine(), d.spec(), d.pool(), d.staging(), d.aux(), FAST));
        int[] firstPages = {1, 2, 3, 4, 5};
        int[] secondPages = {10, 11, 12, 13, 14};
        KvPatterns.fill(p.spec(), p.memory(), 1, new int[] {20, 21, 22, 23, 24}, 0, 5);
        KvReceiver first = rank.receiver(1, boot.url());
        first.init(firstPages, 0, 1); // 4 slots
        await(() -> d.staging().slots().available() == 2, 5_000, () -> "the first room took 4 slots");
        KvReceiver second = rank.receiver(2, boot.url());
        second.init(secondPages, 1, 1); // 4 more: waits
        KvSender one = prefill.sender(1);
        await(() -> one.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "first waiting");
        Thread.sleep(100);
        KvSender two = prefill.sender(2);
        assertEquals(KvPoll.BOOTSTRAPPING, two.poll(), "the second room's destination waits for staging slots");
        one.send(new int[] {20, 21, 22, 23, 24}, true, new byte[4]);
        await(() -> first.poll().isFinal(), 5_000, () -> "first final");
        assertEquals(KvPoll.SUCCESS, first.poll(), first.failureReason());
        assertTrue(KvPatterns.matches(d.spec(), d.memory(), 1, firstPages, 1, 5));
        await(() -> two.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "second waiting, is " + two.poll());
        KvPatterns.fill(p.spec(), p.memory(), 2, new int[] {25, 26, 27, 28, 29}, 0, 5);
        two.send(new int[] {25, 26, 27, 28, 29}, true, new byte[4]);
        await(() -> second.poll().isFinal(), 5_000, () -> "second final");
        assertEquals(KvPoll.SUCCESS, second.poll(), second.failureReason());
        assertTrue(KvPatterns.matches(d.spec(), d.memory(), 2, secondPages, 1, 5));
        assertEquals(6, d.staging().slots().available());

        KvReceiver tooLarge = rank.receiver(3, boot.url());
        tooLarge.init(new int[] {1, 2, 3, 4, 5, 6, 7, 8}, 0, 0);
        await(() -> tooLarge.poll().isFinal(), 5_000, () -> "refusal");
        assertEquals(KvPoll.FAILED, tooLarge.poll());
        assertTrue(
                tooLarge.failureReason().contains("needs 8 staging slots, the staging area has 6"),
                tooLarge.failureReason());
        assertTrue(tooLarge.abort().get(5, TimeUnit.SECONDS));
        assertEquals(6, d.staging().slots().available());
        await(() -> p.staging().slots().available() == 3, 5_000, () -> "prefill staging slots back");
    }

    @Test
    void aStagedDecodeAndADirectPrefillRefuseEachOther() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        TransferEngine pe = keep(TransferEngine.open(TransferConfig.defaults("direct-prefill")
                .withTransports(List.of("tcp"))
                .withTimeouts(2_000, 500, 200)));
        RankSpec direct = new RankSpec(MODEL, 4, 1, 0, 32, 8, 64, pe.address());
        keep(PrefillRank.start(
                pe,
                direct,
                pe.register(RankSpec.KV_REGION, arena.allocate(direct.kvBytes(), 64)),
                pe.register(RankSpec.AUX_REGION, arena.allocate(direct.auxBytes(), 64)),
                boot.url(),
                FAST));
        Node d = node("decode", "tcp", 1, 0, 8);
        DecodeRank rank = keep(DecodeRank.startStaged(d.engine(), d.spec(), d.pool(), d.staging(), d.aux(), FAST));
        KvReceiver rec = rank.receiver(1, boot.url());
        await(() -> rec.poll().isFinal(), 5_000, () -> "refusal");
        assertEquals(KvPoll.FAILED, rec.poll());
        assertTrue(rec.failureReason().contains("only the decode stages"), rec.failureReason());
        RankSpec otherTp = new RankSpec(MODEL, 4, 2, 0, 32, 8, 64, "127.0.0.1:1").withStaging(4);
        assertTrue(d.spec().incompatibility(otherTp, false).contains("split the KV heads differently"));
        assertEquals(
                null, d.spec().incompatibility(otherTp, true), "device-to-device writes split heads as host writes");
        RankSpec mla = new RankSpec(KvGeometry.mla(3, 32, 8, KvDtype.BFLOAT16), 4, 2, 0, 32, 8, 64, "x").withStaging(4);
        RankSpec mlaDecode = new RankSpec(mla.model(), 4, 1, 0, 32, 8, 64, "y").withStaging(4);
        assertEquals(null, mlaDecode.incompatibility(mla, false), "MLA latents are whole on every rank");
        assertEquals(d.spec(), RankSpec.decode(d.spec().encode()), "the staging slot count travels with the spec");
        assertThrows(
                IllegalArgumentException.class,
                () -> DecodeRank.startStaged(d.engine(), d.spec().withStaging(9), d.pool(), d.staging(), d.aux(), FAST),
                "a spec that disagrees with the staging area");
    }

    @ParameterizedTest(name = "prefill tp {0}, decode tp 1")
    @CsvSource({"1", "2"})
    void poolsThatADeviceTransportLinksSkipTheStagingAreas(int prefillTp) throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, prefillTp));
        long room = 41;
        int[] srcPages = {3, 4, 5, 9, 10, 11};
        int[] dstPages = {7, 8, 20, 21, 22, 2};
        List<Node> prefillNodes = new ArrayList<>();
        List<PrefillRank> prefills = new ArrayList<>();
        for (int r = 0; r < prefillTp; r++) {
            Node p = node("prefill-" + r, PretendDeviceTransport.NAME + ",tcp", prefillTp, r, 4);
            prefillNodes.add(p);
            KvPatterns.fill(p.spec(), p.memory(), room, srcPages, 0, srcPages.length);
            PrefillRank rank = keep(
                    PrefillRank.startStaged(p.engine(), p.spec(), p.pool(), p.staging(), p.aux(), boot.url(), FAST));
            assertTrue(rank.spec().deviceKv(), "the prefill's pool is registered as device memory");
            prefills.add(rank);
        }
        Node d = node("decode", PretendDeviceTransport.NAME + ",tcp", 1, 0, 4); // fewer slots than the room: unused
        DecodeRank decode = keep(DecodeRank.startStaged(d.engine(), d.spec(), d.pool(), d.staging(), d.aux(), FAST));
        assertTrue(decode.spec().deviceKv());
        int slicesBefore = PretendDeviceTransport.SLICE_BYTES.size();
        KvReceiver rec = decode.receiver(room, boot.url());
        rec.init(dstPages, 1, 1);
        List<KvSender> senders = new ArrayList<>();
        for (PrefillRank p : prefills) {
            KvSender s = p.sender(room);
            await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "prefill waiting, is " + s.poll());
            senders.add(s);
        }
        assertEquals(4, d.staging().slots().available(), "a device-to-device room takes no staging slots");
        for (KvSender s : senders) {
            s.send(new int[] {3, 4, 5}, false, null);
            s.send(new int[] {9, 10, 11}, true, "aux".getBytes());
        }
        await(() -> rec.poll().isFinal(), 10_000, () -> "decode final");
        assertEquals(KvPoll.SUCCESS, rec.poll(), rec.failureReason());
        assertTrue(
                KvPatterns.matches(d.spec(), d.memory(), room, dstPages, 1, dstPages.length),
                "every head of every sent page, from every prefill rank");
        assertFalse(KvPatterns.matches(d.spec(), d.memory(), room, dstPages, 0, 1), "the prefix page was not sent");
        assertTrue(
                PretendDeviceTransport.SLICE_BYTES.size() > slicesBefore, "the pages went over the device transport");
        for (Node p : prefillNodes) {
            assertEquals(4, p.staging().slots().available(), "the prefill gathered nothing into its staging area");
        }

        // an abort after a first chunk: acknowledged once the device writes in flight are done
        KvReceiver aborted = decode.receiver(room + 1, boot.url());
        aborted.init(new int[] {12, 13, 14, 15}, 2, 0);
        List<KvSender> abortedSenders = new ArrayList<>();
        for (PrefillRank p : prefills) {
            KvSender s = p.sender(room + 1);
            await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "prefill waiting");
            s.send(new int[] {3, 4}, false, null);
            abortedSenders.add(s);
        }
        assertTrue(aborted.abort().get(10, TimeUnit.SECONDS), "released once every prefill rank acknowledged");
        for (KvSender s : abortedSenders) {
            await(() -> s.poll() == KvPoll.FAILED, 5_000, () -> "prefill failed");
        }

        int deregistered = Collections.frequency(PretendDeviceTransport.DEREGISTERED, RankSpec.KV_REGION);
        decode.close();
        prefills.forEach(PrefillRank::close);
        assertEquals(
                deregistered + 1 + prefillTp,
                Collections.frequency(PretendDeviceTransport.DEREGISTERED, RankSpec.KV_REGION),
                "each rank unregistered its pool's device region when it closed");
    }

    @Test
    void whenOnlyOneSideHasADeviceTransportTheRanksStage() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        Node p = node("prefill", PretendDeviceTransport.NAME + ",tcp", 1, 0, 4);
        int[] pages = {1, 2, 3};
        KvPatterns.fill(p.spec(), p.memory(), 7, pages, 0, pages.length);
        PrefillRank prefill =
                keep(PrefillRank.startStaged(p.engine(), p.spec(), p.pool(), p.staging(), p.aux(), boot.url(), FAST));
        Node d = node("decode", "tcp", 1, 0, 4);
        DecodeRank decode = keep(DecodeRank.startStaged(d.engine(), d.spec(), d.pool(), d.staging(), d.aux(), FAST));
        assertTrue(prefill.spec().deviceKv());
        assertFalse(decode.spec().deviceKv(), "an engine without a device transport does not register the pool");
        int slicesBefore = PretendDeviceTransport.SLICE_BYTES.size();
        KvReceiver rec = decode.receiver(7, boot.url());
        rec.init(new int[] {5, 6, 7}, 0, 0);
        KvSender s = prefill.sender(7);
        await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "prefill waiting");
        assertEquals(1, d.staging().slots().available(), "the staged room holds 3 of the decode's 4 staging slots");
        s.send(pages, true, new byte[4]);
        await(() -> rec.poll().isFinal(), 10_000, () -> "decode final");
        assertEquals(KvPoll.SUCCESS, rec.poll(), rec.failureReason());
        assertTrue(KvPatterns.matches(d.spec(), d.memory(), 7, new int[] {5, 6, 7}, 0, 3));
        assertEquals(slicesBefore, PretendDeviceTransport.SLICE_BYTES.size(), "nothing went over the device transport");
        assertEquals(4, d.staging().slots().available());
    }
}
