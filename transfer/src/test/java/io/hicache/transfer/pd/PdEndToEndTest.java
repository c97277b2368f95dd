package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferConfig;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.kit.TransferPeerMain;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * End to end: this JVM is a decode node (emulated device, KV pool registered with its transfer engine); two child
 * JVMs are prefill nodes, each with its own emulated device, bootstrap server and rank. 300 requests of 1 to 40 pages,
 * some with a prefix the decode already holds, go to the two prefills; about one in eight is aborted midway; prefill
 * A is killed with SIGKILL halfway through. Every request that succeeds holds exactly the KV its prefill computed (and
 * its aux data); every other ends FAILED with a reason within its deadline; every failed or aborted request is
 * released two-phase before its pages are freed; at the end no page, aux slot or room is left on the decode nor on
 * the surviving prefill.
 */
public class PdEndToEndTest {
    static final KvGeometry MODEL = KvGeometry.mha(3, 4, 16, KvDtype.BFLOAT16);
    static final PdConfig CONFIG =
            new PdConfig(5_000, 8_000, 5_000, 200, 2, 5_000, 2_000, PdConfig.DEFAULT_WORKER_SPIN_MICROS);
    private static final int REQUESTS = 300;
    private static final int IN_FLIGHT = 24;
    private static final int DECODE_PAGES = 2048;
    private static final long FINAL_BOUND_MILLIS =
            CONFIG.waitingTimeoutMillis() + CONFIG.bootstrapTimeoutMillis() + 2_000;

    static RankSpec spec(String address, int kvPages) {
        return new RankSpec(MODEL, 4, 1, 0, kvPages, 64, 64, address);
    }

    /** A prefill child: its process, the lines it printed, and its input. */
    static final class Child implements AutoCloseable {
        final Process process;
        final List<String> lines = new CopyOnWriteArrayList<>();
        final OutputStream in;

        Child(String name, String transport) throws Exception {
            this(name, PrefillProcessMain.class, List.of(name, "1024", transport));
        }

        /** A prefill child over {@code transport} with transport options ({@code k=v;k=v}). */
        Child(String name, String transport, String options) throws Exception {
            this(name, PrefillProcessMain.class, List.of(name, "1024", transport, options));
        }

        /** A child running {@code main} with {@code args}. */
        Child(String name, Class<?> main, List<String> args) throws Exception {
            List<String> command = new ArrayList<>();
            command.add(ProcessHandle.current().info().command().orElseThrow());
            command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                    .filter(a -> !a.startsWith("-agentlib") && !a.startsWith("-javaagent"))
                    .toList());
            command.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
            command.addAll(args);
            process = new ProcessBuilder(command)
                    .redirectError(ProcessBuilder.Redirect.INHERIT)
                    .start();
            in = process.getOutputStream();
            Thread reader = new Thread(
                    () -> {
                        try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream()))) {
                            for (String l = r.readLine(); l != null; l = r.readLine()) {
                                lines.add(l);
                            }
                        } catch (Exception e) {
                            // the child died
                        }
                    },
                    "e2e-child-" + name);
            reader.setDaemon(true);
            reader.start();
        }

        String awaitLine(String prefix, long millis) throws InterruptedException {
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
            while (System.nanoTime() < until) {
                for (String l : lines) {
                    if (l.startsWith(prefix)) {
                        return l;
                    }
                }
                Thread.sleep(5);
            }
            throw new AssertionError("child did not print '" + prefix + "' within " + millis + " ms: " + lines);
        }

        synchronized void send(String line) {
            try {
                in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                in.flush();
            } catch (Exception e) {
                // a killed child: its requests fail on the decode side, which is what is tested
            }
        }

        @Override
        public void close() {
            process.destroyForcibly();
            try {
                process.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** One request on the decode side. */
    private static final class Request {
        final long room;
        final int child;
        final int[] pages;
        final int positions;
        final int prefix;
        final int auxSlot;
        final long startNanos = System.nanoTime();
        final long abortAtNanos;
        KvReceiver receiver;
        CompletableFuture<Boolean> release;
        KvPoll outcome;

        Request(long room, int child, int[] pages, int prefix, int auxSlot, long abortAtNanos) {
            this.room = room;
            this.child = child;
            this.pages = pages;
            this.positions = pages.length;
            this.prefix = prefix;
            this.auxSlot = auxSlot;
            this.abortAtNanos = abortAtNanos;
        }
    }

    @ParameterizedTest(name = "over {0}")
    @ValueSource(strings = {"tcp"})
    void hundredsOfRequestsWithAbortsAndAKilledPrefill(String transport) throws Exception {
        run(transport, Map.of());
    }

    /**
     * The whole scenario over {@code transport}, with {@code options} (transport options, {@code ucx.tls} and the like)
     * for the decode and both prefills: public so that a transport in another module runs it too.
     */
    public static void run(String transport, Map<String, String> options) throws Exception {
        SplittableRandom random = new SplittableRandom(2026);
        TransferConfig decodeConfig = TransferConfig.defaults("decode")
                .withTransports(List.of(transport))
                .withTimeouts(2_000, 500, 200);
        for (Map.Entry<String, String> o : options.entrySet()) {
            decodeConfig = decodeConfig.withTransportOption(o.getKey(), o.getValue());
        }
        String childOptions = TransferPeerMain.options(decodeConfig);
        try (Child a = new Child("prefill-a", transport, childOptions);
                Child b = new Child("prefill-b", transport, childOptions);
                TransferEngine engine = TransferEngine.open(decodeConfig);
                EmulatedDeviceRuntime device = new EmulatedDeviceRuntime(512L << 20, 1);
                Arena arena = Arena.ofShared()) {
            String[] urls = {
                a.awaitLine("ready ", 60_000).substring(6),
                b.awaitLine("ready ", 60_000).substring(6)
            };
            Child[] children = {a, b};
            RankSpec spec = spec(engine.address(), DECODE_PAGES);
            KvPool pool = device.createPool(spec.format(), DECODE_PAGES);
            LocalRegion kv =
                    engine.register(RankSpec.KV_REGION, pool.hostVisibleMemory().orElseThrow());
            LocalRegion aux = engine.register(RankSpec.AUX_REGION, arena.allocate(spec.auxBytes(), 64));
            ArrayDeque<Integer> auxSlots = new ArrayDeque<>();
            for (int i = 0; i < spec.auxSlots(); i++) {
                auxSlots.add(i);
            }
            int succeeded = 0;
            int failed = 0;
            int aborted = 0;
            int quarantined = 0;
            int onKilled = 0;
            try (DecodeRank rank = DecodeRank.start(engine, spec, kv, aux, CONFIG)) {
                List<Request> active = new ArrayList<>();
                int issued = 0;
                boolean killed = false;
                while (issued < REQUESTS || !active.isEmpty()) {
                    while (active.size() < IN_FLIGHT && issued < REQUESTS) {
                        int positions = 1 + random.nextInt(40);
                        int prefix = random.nextInt(4) == 0 ? random.nextInt(Math.min(3, positions)) : 0;
                        long abortAt = random.nextInt(8) == 0
                                ? System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(random.nextInt(30))
                                : 0;
                        Request r = new Request(
                                issued,
                                issued % 2,
                                pool.allocator().allocate(positions),
                                prefix,
                                auxSlots.poll(),
                                abortAt);
                        r.receiver = rank.receiver(r.room, urls[r.child]);
                        r.receiver.init(r.pages, r.auxSlot, r.prefix);
                        children[r.child].send("req " + r.room + " " + positions);
                        active.add(r);
                        issued++;
                    }
                    if (!killed && issued >= REQUESTS / 2) {
                        a.process.destroyForcibly();
                        killed = true;
                    }
                    for (Iterator<Request> it = active.iterator(); it.hasNext(); ) {
                        Request r = it.next();
                        long now = System.nanoTime();
                        assertTrue(
                                TimeUnit.NANOSECONDS.toMillis(now - r.startNanos)
                                        < FINAL_BOUND_MILLIS + CONFIG.abortAckTimeoutMillis(),
                                "room " + r.room + " is still " + r.receiver.poll() + " after "
                                        + TimeUnit.NANOSECONDS.toMillis(now - r.startNanos) + " ms");
                        if (r.release == null
                                && r.abortAtNanos != 0
                                && now >= r.abortAtNanos
                                && !r.receiver.poll().isFinal()) {
                            r.release = r.receiver.abort();
                            aborted++;
                        }
                        KvPoll state = r.receiver.poll();
                        if (!state.isFinal()) {
                            continue;
                        }
                        if (r.outcome == null) {
                            r.outcome = state;
                            assertTrue(
                                    TimeUnit.NANOSECONDS.toMillis(now - r.startNanos) < FINAL_BOUND_MILLIS,
                                    "room " + r.room + " became final within its deadline");
                        }
                        if (state == KvPoll.SUCCESS) {
                            assertTrue(
                                    KvPatterns.matches(spec, kv.memory(), r.room, r.pages, r.prefix, r.positions),
                                    "room " + r.room + ": decode pages equal what prefill computed");
                            assertEquals(
                                    r.room,
                                    aux.memory()
                                            .get(
                                                    ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN),
                                                    (long) r.auxSlot * spec.auxSlotBytes()),
                                    "room " + r.room + ": aux data");
                            succeeded++;
                        } else {
                            assertNotNull(r.receiver.failureReason(), "a failed room says why");
                            if (r.release == null) {
                                r.release = r.receiver.abort(); // two-phase release before the pages are reused
                            }
                            if (!r.release.isDone()) {
                                continue;
                            }
                            if (!r.release.join()) {
                                quarantined++;
                                r.receiver.close();
                                it.remove();
                                continue; // its pages stay allocated: a late write may still land there
                            }
                            failed++;
                            if (r.child == 0 && killed) {
                                onKilled++;
                            }
                        }
                        r.receiver.close();
                        pool.allocator().free(r.pages);
                        auxSlots.add(r.auxSlot);
                        it.remove();
                    }
                    Thread.sleep(1);
                }
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (rank.activeRooms() > 0 && System.nanoTime() < until) {
                    Thread.sleep(10);
                }
                assertEquals(0, rank.activeRooms(), "decode forgot every room");
            }
            System.err.printf(
                    "pd e2e: %d succeeded, %d failed (%d on the killed prefill), %d aborted, %d " + "quarantined%n",
                    succeeded, failed, onKilled, aborted, quarantined);
            assertEquals(REQUESTS, succeeded + failed + quarantined, "every request ended");
            assertEquals(0, quarantined, "every abort was acknowledged or its prefill was dead");
            assertEquals(DECODE_PAGES, pool.allocator().available(), "decode pages all freed");
            assertEquals(spec.auxSlots(), auxSlots.size(), "aux slots all free");
            assertTrue(succeeded > REQUESTS / 3, "most requests succeed (" + succeeded + ")");
            assertTrue(onKilled > 0, "requests on the killed prefill failed");
            b.send("check");
            String check = b.awaitLine("check ", 10_000);
            // a request aborted before its destination went out is failed by the prefill only at its bootstrap
            // timeout (the sweep runs every quarter of it, at most every second), then its pages are freed
            long until =
                    System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CONFIG.bootstrapTimeoutMillis() + 1_000 + 5_000);
            while (!check.equals("check free=1024 of=1024 rooms=0") && System.nanoTime() < until) {
                Thread.sleep(100);
                b.lines.removeIf(l -> l.startsWith("check "));
                b.send("check");
                check = b.awaitLine("check ", 10_000);
            }
            assertEquals("check free=1024 of=1024 rooms=0", check, "the surviving prefill freed every page and room");
        }
    }
}
