package io.hicache.bench;

import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.pd.BootstrapServer;
import io.hicache.transfer.pd.DecodeRank;
import io.hicache.transfer.pd.KvPoll;
import io.hicache.transfer.pd.KvReceiver;
import io.hicache.transfer.pd.KvSender;
import io.hicache.transfer.pd.PdConfig;
import io.hicache.transfer.pd.PrefillRank;
import io.hicache.transfer.pd.RankSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * The handoff of one 4K-token request's KV from prefill to decode, for a small model (24 layers, 2 KV heads of 64,
 * bf16, 16-token pages: 48 MiB): the time from the prefill's last {@code send} (prefill done) to the decode's poll
 * reading SUCCESS (decode ready), over TCP and over shared memory, against one plain copy of the same bytes. The
 * median of several handoffs. Stateless.
 */
final class HandoffBench {
    private static final KvGeometry MODEL = KvGeometry.mha(24, 2, 64, KvDtype.BFLOAT16);
    private static final int PAGE_TOKENS = 16;
    private static final int PAGES = 4096 / PAGE_TOKENS;

    private HandoffBench() {}

    static List<BenchRow> run(boolean quick) throws Exception {
        int repeats = quick ? 2 : 9;
        List<BenchRow> rows = new ArrayList<>();
        for (String transport : List.of("tcp", "shm")) {
            rows.add(handoff(transport, repeats));
        }
        return rows;
    }

    private static BenchRow handoff(String transport, int repeats) throws Exception {
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-bench-handoff");
        List<String> transports = transport.equals("shm") ? List.of("shm", "tcp") : List.of("tcp");
        PdConfig pd = PdConfig.defaults();
        double[] millis = new double[repeats];
        double[] copyMillis = new double[repeats];
        try (TransferEngine pe = TransferEngine.open(
                        TransferConfig.defaults("bench-prefill").withShmDir(dir).withTransports(transports));
                TransferEngine de = TransferEngine.open(
                        TransferConfig.defaults("bench-decode").withShmDir(dir).withTransports(transports));
                BootstrapServer boot = BootstrapServer.start("127.0.0.1", 0, 1);
                Arena arena = Arena.ofShared()) {
            RankSpec ps = new RankSpec(MODEL, PAGE_TOKENS, 1, 0, PAGES, 4, 64, pe.address());
            RankSpec ds = new RankSpec(MODEL, PAGE_TOKENS, 1, 0, PAGES, 4, 64, de.address());
            LocalRegion pkv = pe.registerShared(RankSpec.KV_REGION, ps.kvBytes());
            LocalRegion paux = pe.registerShared(RankSpec.AUX_REGION, ps.auxBytes());
            LocalRegion dkv = de.registerShared(RankSpec.KV_REGION, ds.kvBytes());
            LocalRegion daux = de.registerShared(RankSpec.AUX_REGION, ds.auxBytes());
            pkv.memory().fill((byte) 9);
            MemorySegment copyTarget = arena.allocate(ps.kvBytes(), 4096);
            int[] pages = new int[PAGES];
            for (int i = 0; i < PAGES; i++) {
                pages[i] = i;
            }
            try (PrefillRank prefill = PrefillRank.start(pe, ps, pkv, paux, boot.url(), pd);
                    DecodeRank decode = DecodeRank.start(de, ds, dkv, daux, pd)) {
                for (int r = -1; r < repeats; r++) {
                    long room = 1000 + r;
                    dkv.memory().fill((byte) 0);
                    try (KvReceiver receiver = decode.receiver(room, boot.url());
                            KvSender sender = prefill.sender(room)) {
                        receiver.init(pages, 0, 0);
                        waitFor(() -> sender.poll() == KvPoll.WAITING_FOR_INPUT, "destination");
                        long start = System.nanoTime();
                        sender.send(pages, true, new byte[] {1});
                        waitFor(() -> receiver.poll().isFinal(), "handoff");
                        long took = System.nanoTime() - start;
                        if (receiver.poll() != KvPoll.SUCCESS) {
                            throw new IllegalStateException("handoff failed: " + receiver.failureReason());
                        }
                        if (dkv.memory().mismatch(pkv.memory()) >= 0) {
                            throw new IllegalStateException("handoff moved wrong bytes");
                        }
                        long c0 = System.nanoTime();
                        MemorySegment.copy(pkv.memory(), 0, copyTarget, 0, ps.kvBytes());
                        long copy = System.nanoTime() - c0;
                        if (r >= 0) {
                            millis[r] = took / 1e6;
                            copyMillis[r] = copy / 1e6;
                        }
                    }
                }
            }
        } finally {
            FileSuite.deleteTree(dir);
        }
        System.err.printf(
                "handoff 4k tokens over %s: %.2f ms (one memcpy: %.2f ms)%n",
                transport, Forks.median(millis), Forks.median(copyMillis));
        return BenchRow.lowerIsBetter(
                "handoff_4k_tokens_48mib_" + transport,
                Forks.median(millis),
                "ms",
                "memcpy_48mib",
                Forks.median(copyMillis));
    }

    private static void waitFor(BooleanSupplier condition, String what) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > until) {
                throw new IllegalStateException("no " + what + " within 60 s");
            }
            Thread.onSpinWait();
        }
    }
}
