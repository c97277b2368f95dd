package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Prefill and decode ranks in this JVM, over TCP: chunked handoffs, heterogeneous TP, refusals, abort, timeouts. */
class PdHandoffTest {
    static final KvGeometry MODEL = KvGeometry.mha(3, 4, 16, KvDtype.BFLOAT16);
    static final PdConfig FAST =
            new PdConfig(1_500, 3_000, 5_000, 200, 2, 3_000, 2_000, PdConfig.DEFAULT_WORKER_SPIN_MICROS);

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

    record Node(TransferEngine engine, RankSpec spec, LocalRegion kv, LocalRegion aux) {}

    private Node node(String name, int pageSize, int tp, int rank, KvGeometry model) {
        TransferEngine e = keep(TransferEngine.open(
                TransferConfig.defaults(name).withTransports(List.of("tcp")).withTimeouts(2_000, 500, 200)));
        RankSpec spec = new RankSpec(model, pageSize, tp, rank, 32, 8, 64, e.address());
        LocalRegion kv = e.register(RankSpec.KV_REGION, arena.allocate(spec.kvBytes(), 64));
        LocalRegion aux = e.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
        return new Node(e, spec, kv, aux);
    }

    private List<PrefillRank> prefills(BootstrapServer boot, int tp, List<Node> nodes) throws Exception {
        List<PrefillRank> ranks = new ArrayList<>();
        for (int r = 0; r < tp; r++) {
            Node n = node("prefill-" + r, 4, tp, r, MODEL);
            nodes.add(n);
            ranks.add(keep(PrefillRank.start(n.engine, n.spec, n.kv, n.aux, boot.url(), FAST)));
        }
        return ranks;
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

    @ParameterizedTest(name = "prefill tp {0}, decode tp {1}")
    @CsvSource({"1,1", "2,1", "1,2", "2,4", "4,2"})
    void chunkedHandoffMovesEveryHeadEachRankNeeds(int prefillTp, int decodeTp) throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, prefillTp));
        List<Node> pNodes = new ArrayList<>();
        List<PrefillRank> prefill = prefills(boot, prefillTp, pNodes);
        long room = 77;
        int positions = 10;
        int prefix = 2;
        List<KvReceiver> receivers = new ArrayList<>();
        List<Node> dNodes = new ArrayList<>();
        List<int[]> dPages = new ArrayList<>();
        for (int r = 0; r < decodeTp; r++) {
            Node d = node("decode-" + r, 4, decodeTp, r, MODEL);
            dNodes.add(d);
            DecodeRank rank = keep(DecodeRank.start(d.engine, d.spec, d.kv, d.aux, FAST));
            int[] pages = {30, 3, 4, 5, 6, 9, 10, 11, 20, 21};
            dPages.add(pages);
            KvReceiver rec = rank.receiver(room, boot.url());
            rec.init(pages, 5, prefix);
            receivers.add(rec);
        }
        int[] srcPages = {1, 2, 3, 4, 8, 7, 12, 13, 14, 15};
        for (int p = 0; p < prefillTp; p++) {
            KvPatterns.fill(pNodes.get(p).spec, pNodes.get(p).kv.memory(), room, srcPages, 0, positions);
        }
        List<KvSender> senders = new ArrayList<>();
        for (PrefillRank p : prefill) {
            KvSender s = p.sender(room);
            await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "prefill waiting, is " + s.poll());
            senders.add(s);
        }
        byte[] aux = "first-token=42".getBytes();
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
        for (int r = 0; r < decodeTp; r++) {
            Node d = dNodes.get(r);
            assertTrue(
                    KvPatterns.matches(d.spec, d.kv.memory(), room, dPages.get(r), prefix, positions),
                    "decode rank " + r + " holds every head it needs for every sent page");
            assertFalse(
                    KvPatterns.matches(d.spec, d.kv.memory(), room, dPages.get(r), 0, 1),
                    "the prefix page the decode already held was not sent");
            byte[] got = d.aux.memory().asSlice(5L * 64, aux.length).toArray(ValueLayout.JAVA_BYTE);
            assertArrayEquals(aux, got, "aux data in the decode's slot");
        }
    }

    @Test
    void aPageSizeMismatchIsRefusedAtHandshake() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        prefills(boot, 1, new ArrayList<>());
        Node d = node("decode", 8, 1, 0, MODEL);
        DecodeRank rank = keep(DecodeRank.start(d.engine, d.spec, d.kv, d.aux, FAST));
        KvReceiver rec = rank.receiver(1, boot.url());
        await(() -> rec.poll().isFinal(), 5_000, () -> "refusal");
        assertEquals(KvPoll.FAILED, rec.poll());
        assertTrue(rec.failureReason().contains("page size"), rec.failureReason());
    }

    @Test
    void aDtypeMismatchIsRefusedAtHandshake() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        prefills(boot, 1, new ArrayList<>());
        Node d = node("decode", 4, 1, 0, KvGeometry.mha(3, 4, 16, KvDtype.FLOAT32));
        DecodeRank rank = keep(DecodeRank.start(d.engine, d.spec, d.kv, d.aux, FAST));
        KvReceiver rec = rank.receiver(1, boot.url());
        await(() -> rec.poll().isFinal(), 5_000, () -> "refusal");
        assertTrue(rec.failureReason().contains("dtype"), rec.failureReason());
    }

    @Test
    void abortIsTwoPhaseAndBothSidesFail() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        List<Node> pn = new ArrayList<>();
        PrefillRank prefill = prefills(boot, 1, pn).get(0);
        Node d = node("decode", 4, 1, 0, MODEL);
        DecodeRank rank = keep(DecodeRank.start(d.engine, d.spec, d.kv, d.aux, FAST));
        KvReceiver rec = rank.receiver(5, boot.url());
        rec.init(new int[] {1, 2, 3, 4}, 0, 0);
        KvSender s = prefill.sender(5);
        await(() -> s.poll() == KvPoll.WAITING_FOR_INPUT, 5_000, () -> "waiting");
        s.send(new int[] {1, 2}, false, null);
        Boolean released = rec.abort().get(10, TimeUnit.SECONDS);
        assertTrue(released, "prefill acknowledged after draining its writes");
        assertEquals(KvPoll.FAILED, rec.poll());
        await(() -> s.poll() == KvPoll.FAILED, 5_000, () -> "prefill failed");
        assertTrue(s.failureReason().contains("aborted"), s.failureReason());
        s.send(new int[] {3, 4}, true, new byte[8]); // ignored: no write after the abort
        rec.close();
        s.close();
        await(() -> rank.activeRooms() == 0 && prefill.activeRooms() == 0, 5_000, () -> "rooms forgotten");
    }

    @Test
    void bootstrapAndWaitingTimeoutsFailRequests() throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        PrefillRank prefill = prefills(boot, 1, new ArrayList<>()).get(0);
        KvSender lonely = prefill.sender(9);
        Node d = node("decode", 4, 1, 0, MODEL);
        DecodeRank rank = keep(DecodeRank.start(d.engine, d.spec, d.kv, d.aux, FAST));
        KvReceiver rec = rank.receiver(10, boot.url());
        rec.init(new int[] {1}, 0, 0); // the prefill never computes room 10
        await(() -> lonely.poll() == KvPoll.FAILED, 4_000, () -> "bootstrap timeout");
        assertTrue(lonely.failureReason().contains("no destination"), lonely.failureReason());
        await(() -> rec.poll() == KvPoll.FAILED, 6_000, () -> "waiting timeout");
        assertTrue(rec.failureReason().contains("did not finish"), rec.failureReason());
    }
}
