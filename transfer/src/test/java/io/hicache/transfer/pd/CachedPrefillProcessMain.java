package io.hicache.transfer.pd;

import io.hicache.core.Deadline;
import io.hicache.core.cache.HiCache;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import java.util.stream.Stream;

/**
 * A prefill process on its own cache for {@code CachedPdEndToEndTest}: an emulated device, a {@link HiCache} with a
 * host pool, a transfer engine, a bootstrap server and a {@link CachedPrefill}. Reads {@code req <room>} lines and
 * prefills the room's synthetic prompt ({@link SyntheticChat}), printing {@code done <room> <state> <cached tokens>
 * <computed tokens>}; {@code half <room>} sends every page of the room's prompt but the last (whatever the pool holds
 * there) as a chunk that is not the last, prints {@code half <room>} once it is on its way, and sends nothing more (a
 * prefill to be killed mid-transfer); {@code check} waits for the cache's background work and prints {@code check pinned=<bool>
 * rooms=<n>}. Prints {@code ready <bootstrap url>} when it serves. Args: name, transport, device pages, host folder.
 */
public final class CachedPrefillProcessMain {
    private CachedPrefillProcessMain() {}

    public static void main(String[] args) throws Exception {
        int devicePages = Integer.parseInt(args[2]);
        Path hostDir = Path.of(args[3]); // the test's, which removes it: this process may be killed
        try (TransferEngine engine = TransferEngine.open(TransferConfig.defaults(args[0])
                        .withTransports(List.of(args[1]))
                        .withTimeouts(2_000, 500, 200));
                EmulatedDeviceRuntime device = new EmulatedDeviceRuntime(256L << 20, 1);
                HiCache cache = CachedPdEndToEndTest.cache(device, hostDir, devicePages);
                Arena arena = Arena.ofShared();
                BootstrapServer boot = BootstrapServer.start("127.0.0.1", 0, 1)) {
            RankSpec spec = CachedPdEndToEndTest.spec(engine.address(), devicePages);
            LocalRegion kv = engine.register(
                    RankSpec.KV_REGION, cache.device().hostVisibleMemory().orElseThrow());
            LocalRegion aux = engine.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
            ExecutorService workers = Executors.newFixedThreadPool(4);
            try (PrefillRank rank = PrefillRank.start(engine, spec, kv, aux, boot.url(), PdEndToEndTest.CONFIG)) {
                CachedPrefill prefill = CachedPrefill.over(cache, rank);
                say("ready " + boot.url());
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    String[] w = line.split(" ");
                    if (w[0].equals("req")) {
                        long room = Long.parseLong(w[1]);
                        workers.execute(() -> serve(prefill, cache, room));
                    } else if (w[0].equals("half")) {
                        long room = Long.parseLong(w[1]);
                        workers.execute(() -> sendAllButTheLastPage(rank, room));
                    } else if (w[0].equals("check")) {
                        boolean idle = cache.awaitIdle(Duration.ofSeconds(10));
                        say("check pinned=" + !(idle && cache.nothingPinned()) + " rooms=" + rank.activeRooms());
                    }
                }
            } finally {
                workers.shutdownNow();
                workers.awaitTermination(10, TimeUnit.SECONDS);
            }
        } finally {
            try (Stream<Path> all = Files.walk(hostDir)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private static void serve(CachedPrefill prefill, HiCache cache, long room) {
        try {
            CachedPrefill.Outcome o = prefill.prefill(
                    room,
                    "room-" + room,
                    SyntheticChat.prompt(room),
                    (tokens, from, pages) -> SyntheticChat.compute(cache, tokens, from, pages),
                    Long.toString(room).getBytes(),
                    Deadline.after(Duration.ofSeconds(20)));
            say("done " + room + " " + o.state() + " " + o.cachedTokens() + " " + o.computedTokens());
        } catch (Exception e) {
            say("done " + room + " FAILED 0 0 " + e);
        }
    }

    private static void sendAllButTheLastPage(PrefillRank rank, long room) {
        try {
            KvSender sender = rank.sender(room);
            long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (sender.poll() == KvPoll.BOOTSTRAPPING && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            int positions =
                    (SyntheticChat.prompt(room).length + CachedPdEndToEndTest.PAGE - 1) / CachedPdEndToEndTest.PAGE;
            sender.send(IntStream.range(0, positions - 1).toArray(), false, null);
            while (sender.poll() != KvPoll.TRANSFERRING && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            say("half " + room + " " + sender.poll());
        } catch (Exception e) {
            say("half " + room + " FAILED " + e);
        }
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
