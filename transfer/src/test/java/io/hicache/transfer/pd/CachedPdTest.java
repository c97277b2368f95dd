package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.staged.StagingArea;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 20, parts 1 and 2, in one JVM over TCP: a prefill and a decode, each on its own cache (emulated device, host
 * pool), serve a conversation of several turns. Each turn's prompt is the last one, the answer the decode generated,
 * and a new message. The prefill computes only what its cache lacks; the decode receives only what its cache lacks
 * (the earlier turns it decoded are there), and every prompt page on the decode has the bytes the prefill computed
 * for its tokens; at the end nothing is pinned on either side.
 */
class CachedPdTest {
    private static final KvGeometry MODEL = KvGeometry.mha(3, 2, 16, KvDtype.BFLOAT16);
    private static final int PAGE = 4;
    private static final int DEVICE_PAGES = 256;

    private final List<AutoCloseable> open = new ArrayList<>();
    private final List<Path> dirs = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
        arena.close();
        for (Path dir : dirs) {
            try (Stream<Path> all = Files.walk(dir)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private <T extends AutoCloseable> T keep(T c) {
        open.add(c);
        return c;
    }

    /**
     * One side: its cache over an emulated device, its transfer engine with the cache's pool registered, or (staged,
     * as a CUDA pool would be) a staging area instead.
     */
    private record Side(
            HiCache cache,
            TransferEngine engine,
            RankSpec spec,
            LocalRegion kv,
            LocalRegion aux,
            StagingArea staging) {}

    private Side side(String name, boolean staged) throws Exception {
        Path shm = Path.of("/dev/shm");
        Path dir = Files.createTempDirectory(
                Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")), "hicache-pd-" + name);
        dirs.add(dir);
        EmulatedDeviceRuntime runtime = keep(new EmulatedDeviceRuntime(64L << 20, 2));
        HiCache cache = keep(HiCache.builder()
                .config(HiCacheConfig.from(Settings.builder()
                        .flag("page-size", Integer.toString(PAGE))
                        .flag("hicache-ratio", "2")
                        .flag("host.dir", dir.toString())
                        .build()))
                .namespace(Namespace.of("pd-model", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                .geometry(MODEL)
                .devicePages(DEVICE_PAGES)
                .runtime(runtime)
                .open());
        TransferEngine engine = keep(TransferEngine.open(
                TransferConfig.defaults(name).withTransports(List.of("tcp")).withTimeouts(2_000, 500, 200)));
        RankSpec spec = new RankSpec(MODEL, PAGE, 1, 0, DEVICE_PAGES, 8, 64, engine.address());
        LocalRegion aux = engine.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
        if (staged) {
            // the prefill's area is smaller than a turn (its chunks go in pieces), the decode's holds a turn
            int slots = name.equals("prefill") ? 8 : 64;
            StagingArea staging =
                    keep(StagingArea.open(engine, RankSpec.STAGING_REGION, runtime, cache.format(), slots));
            return new Side(cache, engine, spec.withStaging(slots), null, aux, staging);
        }
        MemorySegment pool = cache.device().hostVisibleMemory().orElseThrow();
        LocalRegion kv = engine.register(RankSpec.KV_REGION, pool);
        return new Side(cache, engine, spec, kv, aux, null);
    }

    /** A bootstrap server, a prefill and a decode, each on its cache. */
    private record Pd(BootstrapServer boot, Side p, Side d, CachedPrefill prefill, CachedDecode decode) {}

    private Pd start(boolean staged) throws Exception {
        BootstrapServer boot = keep(BootstrapServer.start("127.0.0.1", 0, 1));
        Side p = side("prefill", staged);
        Side d = side("decode", staged);
        PrefillRank prefillRank = keep(
                staged
                        ? PrefillRank.startStaged(
                                p.engine,
                                p.spec,
                                p.cache.device().pool(),
                                p.staging,
                                p.aux,
                                boot.url(),
                                PdHandoffTest.FAST)
                        : PrefillRank.start(p.engine, p.spec, p.kv, p.aux, boot.url(), PdHandoffTest.FAST));
        DecodeRank decodeRank = keep(
                staged
                        ? DecodeRank.startStaged(
                                d.engine, d.spec, d.cache.device().pool(), d.staging, d.aux, PdHandoffTest.FAST)
                        : DecodeRank.start(d.engine, d.spec, d.kv, d.aux, PdHandoffTest.FAST));
        return new Pd(
                boot,
                p,
                d,
                CachedPrefill.over(p.cache, prefillRank),
                keep(CachedDecode.over(d.cache, decodeRank, 5_000, true)));
    }

    @Test
    void aHandoffThatNeverCameIsAbortedAndItsPagesFreed() throws Exception {
        Pd pd = start(false);
        int[] prompt = tokens(new SplittableRandom(3), 40);
        // no prefill ever computes room 9: the decode gives up at its deadline and aborts in two phases
        CachedDecode.Received got =
                pd.decode.receive(9, "d9", prompt, pd.boot.url(), 0, Deadline.after(Duration.ofMillis(300)));
        assertEquals(KvPoll.FAILED, got.state());
        assertEquals(null, got.request(), "the request was closed");
        assertEquals(
                0, pd.decode.quarantinedRequests(), "the prefill confirmed that nothing can land: " + got.failure());
        assertTrue(pd.d.cache.awaitIdle(Duration.ofSeconds(10)));
        assertTrue(pd.d.cache.nothingPinned(), "the failed request's pages are free");
        assertEquals(0, pd.d.cache.stats().devicePages(), "nothing of the failed handoff was cached");
    }

    @ParameterizedTest(name = "staged {0}")
    @ValueSource(booleans = {false, true})
    void eachTurnMovesOnlyWhatTheDecodeLacksAndTheDecodeKeepsItForTheNext(boolean staged) throws Exception {
        Pd pd = start(staged);
        Side p = pd.p;
        Side d = pd.d;
        BootstrapServer boot = pd.boot;
        CachedPrefill prefill = pd.prefill;
        CachedDecode decode = pd.decode;
        ExecutorService prefillThread = Executors.newSingleThreadExecutor();
        SplittableRandom random = new SplittableRandom(7);
        int[] conversation = new int[0];
        int decodedBefore = 0; // whole pages of the last turn's sequence the decode committed
        try {
            for (int turn = 0; turn < 4; turn++) {
                int[] prompt = SyntheticChat.concat(conversation, tokens(random, 30 + random.nextInt(20)));
                long room = 100 + turn;
                byte[] aux = ("turn " + turn).getBytes();
                String prefillId = "p" + turn;
                Future<CachedPrefill.Outcome> sent = prefillThread.submit(() -> prefill.prefill(
                        room,
                        prefillId,
                        prompt,
                        (tokens, from, pages) -> SyntheticChat.compute(p.cache, tokens, from, pages),
                        aux,
                        Deadline.after(Duration.ofSeconds(20))));
                CachedDecode.Received got = decode.receive(
                        room, "d" + turn, prompt, boot.url(), turn % 8, Deadline.after(Duration.ofSeconds(20)));
                CachedPrefill.Outcome out = sent.get(30, TimeUnit.SECONDS);
                assertEquals(KvPoll.SUCCESS, got.state(), got.failure());
                assertEquals(KvPoll.SUCCESS, out.state(), out.failure());
                assertNotNull(got.request());
                // the decode held what it decoded last turn, and received the rest
                assertEquals(decodedBefore * PAGE, got.cachedTokens(), "turn " + turn + ": tokens the decode held");
                assertEquals(prompt.length - decodedBefore * PAGE, got.receivedTokens());
                // the prefill computed only past what its cache held: last turn's prompt, in whole pages
                assertEquals(
                        turn == 0 ? 0 : conversationPromptPages(turn) * PAGE,
                        out.cachedTokens(),
                        "turn " + turn + ": tokens the prefill's cache served");
                assertEquals(
                        0,
                        SyntheticChat.wrongPages(d.cache, prompt, got.pages()),
                        "turn " + turn + ": prompt pages on the decode without the bytes computed for them");
                byte[] landed = d.aux.memory()
                        .asSlice((long) (turn % 8) * 64, aux.length)
                        .toArray(ValueLayout.JAVA_BYTE);
                assertEquals(new String(aux), new String(landed), "aux data");
                // the engine decodes an answer of 12 tokens, then commits the finished sequence and closes the request
                int[] sequence = SyntheticChat.decode(decode, d.cache, got, prompt, tokens(random, 12));
                decodedBefore = sequence.length / PAGE;
                promptPages.add(prompt.length / PAGE);
                conversation = sequence;
            }
        } finally {
            prefillThread.shutdownNow();
        }
        assertEquals(0, decode.quarantinedRequests());
        // the backups the commits started pin their pages until they are done
        assertTrue(p.cache.awaitIdle(Duration.ofSeconds(10)) && d.cache.awaitIdle(Duration.ofSeconds(10)));
        assertTrue(p.cache.nothingPinned(), "the prefill's cache holds no pins");
        assertTrue(d.cache.nothingPinned(), "the decode's cache holds no pins");
        assertTrue(
                d.cache.stats().backupsCompleted() > 0, "decode offload backed the finished requests up to the host");
        if (staged) {
            assertEquals(64, d.staging.slots().available(), "every room gave the decode's staging slots back");
            assertEquals(8, p.staging.slots().available(), "every piece gave the prefill's staging slots back");
        }
    }

    /** Whole pages of the prompt of turn {@code turn - 1}: what the prefill's cache holds at turn {@code turn}. */
    private int conversationPromptPages(int turn) {
        return promptPages.get(turn - 1);
    }

    private final List<Integer> promptPages = new ArrayList<>();

    private static int[] tokens(SplittableRandom random, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(30_000);
        }
        return t;
    }
}
