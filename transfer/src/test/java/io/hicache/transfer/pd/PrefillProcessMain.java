package io.hicache.transfer.pd;

import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.kit.TransferPeerMain;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * A prefill process for the end-to-end test: its own emulated device with a KV pool, a transfer engine, a bootstrap
 * server and one prefill rank. Reads {@code req <room> <pages>} lines: allocates the pages, waits for the decode's
 * destination, "computes" the KV chunk by chunk (a pattern of room and position) and sends each chunk, the aux data
 * (the room id) last; prints {@code done <room> <state>} and frees the pages. {@code check} prints the pool's free
 * pages and the rank's rooms. Prints {@code ready <bootstrap url>} when it serves. Each request is served on its own
 * thread, so one that waits out the bootstrap timeout delays no other.
 */
public final class PrefillProcessMain {
    static final int CHUNK_PAGES = 4;

    private PrefillProcessMain() {}

    public static void main(String[] args) throws Exception {
        int kvPages = Integer.parseInt(args[1]);
        TransferConfig config = TransferConfig.defaults(args[0])
                .withTransports(List.of(args[2]))
                .withTimeouts(2_000, 500, 200);
        if (args.length > 3) {
            config = TransferPeerMain.withOptions(config, args[3]);
        }
        try (TransferEngine engine = TransferEngine.open(config);
                EmulatedDeviceRuntime device = new EmulatedDeviceRuntime(512L << 20, 1);
                Arena arena = Arena.ofShared();
                BootstrapServer boot = BootstrapServer.start("127.0.0.1", 0, 1)) {
            RankSpec spec = PdEndToEndTest.spec(engine.address(), kvPages);
            KvPool pool = device.createPool(spec.format(), kvPages);
            LocalRegion kv =
                    engine.register(RankSpec.KV_REGION, pool.hostVisibleMemory().orElseThrow());
            LocalRegion aux = engine.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
            // a thread per request in flight: a request the decode aborted before its destination went out waits here
            // for the bootstrap timeout (nothing tells this rank), and a small pool would queue the requests behind
            // it past the test's final check (seen in CI: four such waits held all four workers and 95 pages)
            ExecutorService workers = Executors.newCachedThreadPool();
            try (PrefillRank rank = PrefillRank.start(engine, spec, kv, aux, boot.url(), PdEndToEndTest.CONFIG)) {
                say("ready " + boot.url());
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    String[] w = line.split(" ");
                    if (w[0].equals("req")) {
                        long room = Long.parseLong(w[1]);
                        int pages = Integer.parseInt(w[2]);
                        workers.execute(() -> serve(rank, pool, spec, room, pages));
                    } else if (w[0].equals("check")) {
                        say("check free=" + pool.allocator().available() + " of=" + kvPages + " rooms="
                                + rank.activeRooms());
                    }
                }
            } finally {
                workers.shutdownNow();
                workers.awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }

    private static void serve(PrefillRank rank, KvPool pool, RankSpec spec, long room, int positions) {
        int[] pages = null;
        KvSender sender = rank.sender(room);
        try {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while ((pages = pool.allocator().tryAllocate(positions)) == null && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            if (pages == null) {
                say("done " + room + " FAILED no-pages");
                return;
            }
            while (sender.poll() == KvPoll.BOOTSTRAPPING && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            if (sender.poll() == KvPoll.WAITING_FOR_INPUT) {
                KvPatterns.fill(spec, pool.hostVisibleMemory().orElseThrow(), room, pages, 0, positions);
                for (int from = 0; from < positions; from += CHUNK_PAGES) {
                    int to = Math.min(positions, from + CHUNK_PAGES);
                    byte[] aux = to == positions
                            ? ByteBuffer.allocate(8).putLong(room).array()
                            : null;
                    sender.send(Arrays.copyOfRange(pages, from, to), to == positions, aux);
                    Thread.sleep(1); // the next chunk is being "computed"
                }
            }
            while (!sender.poll().isFinal() && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            say("done " + room + " " + sender.poll());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            sender.close();
            if (pages != null) {
                // the rank forgets a released room once no write reads its pages any more; only then reuse them
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (rank.tracks(room) && System.nanoTime() < until) {
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                pool.allocator().free(pages);
            }
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
