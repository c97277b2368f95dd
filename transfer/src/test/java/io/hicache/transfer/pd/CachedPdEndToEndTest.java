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
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Issue 20, part 6: prefill and decode on their caches across processes. This JVM is the decode (a cache on an
 * emulated device, its pool registered with its transfer engine); two child JVMs are prefills, each on its own cache
 * ({@link CachedPrefillProcessMain}). Eight conversations of four turns, each conversation on one prefill; turn n+1 on
 * the decode holds exactly what turn n decoded (counts) and every received page has the bytes the prefill computed;
 * each prefill's cache serves the conversation's earlier prompt. Prefill A is killed with SIGKILL in turn 2, in the
 * middle of conversation 0's handoff (it sent every page but the last, as a chunk that is not the last): that handoff
 * and its conversations' later turns fail within the deadline and are released in two phases (a dead prefill can
 * write nothing); a handoff no prefill ever serves is aborted. At the end no pin, room or quarantined page is left on the
 * decode, nor pin or room on the surviving prefill.
 */
class CachedPdEndToEndTest {
    static final KvGeometry MODEL = KvGeometry.mha(3, 4, 16, KvDtype.BFLOAT16);
    static final int PAGE = 4;
    private static final int CONVERSATIONS = 8;
    private static final int TURNS = 4;

    static RankSpec spec(String address, int devicePages) {
        return new RankSpec(MODEL, PAGE, 1, 0, devicePages, 64, 64, address);
    }

    /** A cache over {@code device} with a host pool in {@code hostDir}: what every node of the test runs. */
    static HiCache cache(EmulatedDeviceRuntime device, Path hostDir, int devicePages) {
        return HiCache.builder()
                .config(HiCacheConfig.from(Settings.builder()
                        .flag("page-size", Integer.toString(PAGE))
                        .flag("hicache-ratio", "2")
                        .flag("host.dir", hostDir.toString())
                        .build()))
                .namespace(Namespace.of("pd-e2e", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1))
                .geometry(MODEL)
                .devicePages(devicePages)
                .runtime(device)
                .open();
    }

    /**
     * Prefill A sends all but the last page of {@code room}, is killed once that is on its way, and the decode's
     * receive of the room fails (the prefill died) within its deadline.
     */
    private static CachedDecode.Received killedMidTransfer(
            CachedDecode decode, PdEndToEndTest.Child a, long room, int[] prompt, String url, RankSpec spec)
            throws Exception {
        a.send("half " + room);
        CompletableFuture<CachedDecode.Received> receiving = CompletableFuture.supplyAsync(() -> {
            try {
                return decode.receive(
                        room,
                        "room-" + room,
                        prompt,
                        url,
                        (int) (room % spec.auxSlots()),
                        Deadline.after(Duration.ofSeconds(15)));
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertEquals(
                "half " + room + " TRANSFERRING",
                a.awaitLine("half " + room + " ", 20_000),
                "prefill A sent all but the last page");
        a.process.destroyForcibly(); // prefill A dies mid-transfer
        CachedDecode.Received got = receiving.get(30, TimeUnit.SECONDS);
        // the connection's end or the missed health checks, whichever the decode notices first
        assertTrue(
                got.failure() != null
                        && (got.failure().contains("died") || got.failure().contains("heartbeats")),
                "the decode saw the prefill die: " + got.failure());
        return got;
    }

    @Test
    void conversationsOverTwoPrefillProcessesOneKilled() throws Exception {
        // Every node's host folder is made here and removed here: a prefill killed with SIGKILL cannot clean up.
        Path work = Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "hicache-e2e-");
        Path hostDir = work.resolve("decode");
        String hostA = work.resolve("prefill-a").toString();
        String hostB = work.resolve("prefill-b").toString();
        try (PdEndToEndTest.Child a = new PdEndToEndTest.Child(
                        "prefill-a", CachedPrefillProcessMain.class, List.of("prefill-a", "tcp", "2048", hostA));
                PdEndToEndTest.Child b = new PdEndToEndTest.Child(
                        "prefill-b", CachedPrefillProcessMain.class, List.of("prefill-b", "tcp", "2048", hostB));
                TransferEngine engine = TransferEngine.open(TransferConfig.defaults("decode")
                        .withTransports(List.of("tcp"))
                        .withTimeouts(2_000, 500, 200));
                EmulatedDeviceRuntime device = new EmulatedDeviceRuntime(256L << 20, 1);
                HiCache cache = cache(device, hostDir, 4096);
                Arena arena = Arena.ofShared()) {
            String[] urls = {
                a.awaitLine("ready ", 60_000).substring(6),
                b.awaitLine("ready ", 60_000).substring(6)
            };
            PdEndToEndTest.Child[] children = {a, b};
            RankSpec spec = spec(engine.address(), 4096);
            LocalRegion kv = engine.register(
                    RankSpec.KV_REGION, cache.device().hostVisibleMemory().orElseThrow());
            LocalRegion aux = engine.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
            int succeeded = 0;
            int failedOnKilled = 0;
            try (DecodeRank rank = DecodeRank.start(engine, spec, kv, aux, PdEndToEndTest.CONFIG);
                    CachedDecode decode = CachedDecode.over(cache, rank, 10_000, true)) {
                int[] decodedWholeTokens = new int[CONVERSATIONS];
                for (int turn = 0; turn < TURNS; turn++) {
                    for (int c = 0; c < CONVERSATIONS; c++) {
                        int child = c % 2;
                        long room = SyntheticChat.room(c, turn);
                        int[] prompt = SyntheticChat.prompt(room);
                        CachedDecode.Received got;
                        if (turn == 2 && c == 0) {
                            got = killedMidTransfer(decode, a, room, prompt, urls[0], spec);
                        } else {
                            children[child].send("req " + room);
                            got = decode.receive(
                                    room,
                                    "room-" + room,
                                    prompt,
                                    urls[child],
                                    (int) (room % spec.auxSlots()),
                                    Deadline.after(Duration.ofSeconds(15)));
                        }
                        if (child == 0 && turn >= 2) {
                            assertEquals(KvPoll.FAILED, got.state(), "room " + room + " on the killed prefill");
                            assertNotNull(got.failure());
                            failedOnKilled++;
                            continue;
                        }
                        assertEquals(KvPoll.SUCCESS, got.state(), "room " + room + ": " + got.failure());
                        int held = turn == 0 ? (c == 0 ? 0 : 64) : decodedWholeTokens[c]; // 64: the system prompt
                        assertEquals(held, got.cachedTokens(), "room " + room + ": tokens the decode held");
                        assertEquals(
                                0, SyntheticChat.wrongPages(cache, prompt, got.pages()), "room " + room + " bytes");
                        String done = children[child].awaitLine("done " + room + " ", 20_000);
                        int prefillCached = turn == 0
                                ? (c < 2 ? 0 : 64)
                                : SyntheticChat.prompt(SyntheticChat.room(c, turn - 1)).length;
                        assertEquals(
                                "done " + room + " SUCCESS " + prefillCached + " " + (prompt.length - prefillCached),
                                done,
                                "the prefill's cache served the conversation's earlier prompt");
                        int[] sequence =
                                SyntheticChat.decode(decode, cache, got, prompt, SyntheticChat.answer(c, turn));
                        decodedWholeTokens[c] = sequence.length / PAGE * PAGE;
                        succeeded++;
                    }
                }
                // a handoff no prefill serves: the decode gives up and aborts it in two phases
                CachedDecode.Received never = decode.receive(
                        SyntheticChat.room(99, 0),
                        "never",
                        SyntheticChat.prompt(SyntheticChat.room(99, 0)),
                        urls[1],
                        1,
                        Deadline.after(Duration.ofMillis(500)));
                assertEquals(KvPoll.FAILED, never.state());
                assertEquals(0, decode.quarantinedRequests(), "every failed handoff was released");
                assertTrue(cache.awaitIdle(Duration.ofSeconds(20)));
                assertTrue(cache.nothingPinned(), "no pin left on the decode");
                long until = System.nanoTime() + Duration.ofSeconds(20).toNanos();
                while (rank.activeRooms() > 0 && System.nanoTime() < until) {
                    Thread.sleep(10);
                }
                assertEquals(0, rank.activeRooms(), "no room left on the decode");
            }
            assertEquals(CONVERSATIONS * TURNS - CONVERSATIONS / 2 * 2, succeeded);
            assertEquals(CONVERSATIONS / 2 * 2, failedOnKilled);
            // the surviving prefill: no pin, and no room once it dropped the one only the decode named (the handoff
            // no prefill served), after its bootstrap timeout
            String check = "";
            long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!check.equals("check pinned=false rooms=0") && System.nanoTime() < until) {
                int seen = b.lines.size();
                b.send("check");
                b.awaitLine("check ", 30_000);
                while (b.lines.size() == seen || !b.lines.getLast().startsWith("check ")) {
                    Thread.sleep(10);
                }
                check = b.lines.getLast();
                Thread.sleep(check.equals("check pinned=false rooms=0") ? 0 : 500);
            }
            assertEquals("check pinned=false rooms=0", check, "the surviving prefill");
        } finally {
            try (Stream<Path> all = Files.walk(work)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }
}
