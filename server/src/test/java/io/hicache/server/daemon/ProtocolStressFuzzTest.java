package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.hicache.core.Deadline;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.protocol.Wire;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The protocol fuzz's phases on what a connection may hold before it has earned it, each beside a {@link HealthyClient}
 * that must see every operation succeed during the phase and every acknowledged page intact after it, under Netty's
 * paranoid leak detection:
 * <ol>
 *   <li>connections that never finish a HELLO (silent, half a HELLO, a HELLO a byte at a time, a frame header and no
 *       body) hold every free slot of a daemon with a short {@code server.handshake-timeout} and few
 *       {@code server.max-connections}: a new client retrying BUSY still gets in within the handshake timeout and a
 *       margin, and the slots are freed;
 *   <li>authenticated connections each send most of a frame declared near {@code server.max-frame-bytes} and stall:
 *       with a small {@code server.max-partial-frame-bytes} the daemon holds at most that budget of frames (the others
 *       are answered ERROR BUSY and closed), its direct memory does not grow with the declared lengths, and the budget
 *       comes back when the connections close.
 * </ol>
 * The seed is printed; set {@code -Dfuzz.seed=N} to replay a run.
 */
class ProtocolStressFuzzTest {
    private static final long SEED = Long.getLong("fuzz.seed", System.nanoTime());
    private static final int PAGE = 4096;
    /** Connections a {@link RemotePageStore} keeps (RemoteStoreConfig.local), all opened before a phase starts. */
    private static final int HEALTHY_CONNECTIONS = 4;
    /** Half the 64 MiB slab of these phases' daemons, which have no L3 to evict to. */
    private static final int HEALTHY_MAX_PAGES = (64 << 20) / PAGE / 2;

    @BeforeAll
    static void paranoid() {
        System.out.println("ProtocolStressFuzzTest seed " + SEED + " (replay with -Dfuzz.seed=" + SEED + ")");
        FuzzLeaks.watch();
    }

    @AfterAll
    static void restore() {
        FuzzLeaks.stopWatching();
    }

    /* ---------------------------------------------------------------- phase 1: pre-handshake holds */

    private static final int HANDSHAKE_MILLIS = 500;
    private static final int MAX_CONNECTIONS = 12;
    private static final int HOLDERS = 12;
    private static final long HOLD_PHASE_MILLIS = 6_000;
    /** How long a new client may take to get in: a held slot is freed within the handshake timeout, plus a margin. */
    private static final long GET_IN_MILLIS = HANDSHAKE_MILLIS + 2_500;

    /** What the holders saw. */
    private static final class HoldStats {
        final LongAdder busy = new LongAdder();
        final LongAdder timedOut = new LongAdder();
        final LongAdder closedSilently = new LongAdder();
        final LongAdder leftEarly = new LongAdder();
        final ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
    }

    @Test
    void connectionsWithoutAHelloDoNotLockOutANewClient() throws Exception {
        SplittableRandom random = new SplittableRandom(SEED ^ 0x1111);
        HoldStats stats = new HoldStats();
        List<Long> getInMillis = new ArrayList<>();
        try (TestDaemon d = TestDaemon.start(Map.of(
                "server.store",
                "none",
                "server.host-size",
                "64MiB",
                "server.handshake-timeout",
                HANDSHAKE_MILLIS + "ms",
                "server.max-connections",
                Integer.toString(MAX_CONNECTIONS)))) {
            Healthy healthy = beside(d, random.nextLong(), client -> {
                hold(d, random, stats, getInMillis, client);
                // Every slot a holder took is free again: only the healthy client's connections are left, and a new
                // client gets in at once.
                FuzzLeaks.awaitConnections(d.server, HEALTHY_CONNECTIONS, HANDSHAKE_MILLIS + 2_000);
                assertEquals(
                        1,
                        getIn(d.port(), d.server.config.authToken()).attempts(),
                        "a client after the phase was refused");
            });
            System.out.printf(
                    "phase 1 (pre-handshake holds): %d connections refused BUSY, %d closed by the "
                            + "handshake timeout, %d closed without an answer, %d left early; %d new clients got in (slowest "
                            + "%d ms); %s%n",
                    stats.busy.sum(),
                    stats.timedOut.sum(),
                    stats.closedSilently.sum(),
                    stats.leftEarly.sum(),
                    getInMillis.size(),
                    getInMillis.stream().mapToLong(Long::longValue).max().orElse(-1),
                    healthy);
            healthy.assertOk();
            assertTrue(
                    stats.violations.isEmpty(),
                    () -> stats.violations.size() + " holders saw what they should not; " + "the first: "
                            + stats.violations.peek());
            assertTrue(stats.busy.sum() > 0, "the holders never filled the daemon's slots: the phase tested nothing");
            assertTrue(stats.timedOut.sum() > 0, "no connection was closed by the handshake timeout");
            assertTrue(getInMillis.size() >= 3, "only " + getInMillis.size() + " new clients got in during the phase");
            FuzzLeaks.awaitQuiet(d.server);
        }
        FuzzLeaks.assertNoLeaksAndTheDetectorWorks();
    }

    /**
     * {@link #HOLDERS} threads take slots with connections that never shake hands, for {@link #HOLD_PHASE_MILLIS},
     * while new clients get in one after another (each within {@link #GET_IN_MILLIS}).
     */
    private static void hold(
            TestDaemon d, SplittableRandom random, HoldStats stats, List<Long> getInMillis, HealthyClient healthy)
            throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        List<Future<?>> holders = new ArrayList<>();
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int i = 0; i < HOLDERS; i++) {
                SplittableRandom r = random.split();
                holders.add(pool.submit(() -> {
                    while (!stop.get()) {
                        holdOnce(d.port(), r, stats);
                        // A pause before the next hold: the check is that slots are freed, not that the new client
                        // beats twelve holders reconnecting at once to each freed slot (it lost 48 races in a row
                        // about once in fifty runs under load).
                        Thread.sleep(100 + r.nextInt(200));
                    }
                    return null;
                }));
            }
            long end = System.nanoTime() + HOLD_PHASE_MILLIS * 1_000_000;
            try {
                while (System.nanoTime() < end) {
                    getInMillis.add(getIn(d.port(), d.server.config.authToken()).millis());
                    healthy.check();
                    Thread.sleep(random.nextInt(100));
                }
            } finally {
                stop.set(true);
            }
            for (Future<?> h : holders) {
                h.get(30, TimeUnit.SECONDS);
            }
        }
    }

    /** A connection that takes a slot and never completes a HELLO; checks how the daemon ends it. */
    private static void holdOnce(int port, SplittableRandom random, HoldStats stats) throws InterruptedException {
        int kind = random.nextInt(5);
        byte[] hello = RawClient.frame(Wire.HELLO, 1, RawClient.helloPayload(Wire.MAGIC, Wire.VERSION, ""));
        long start = System.nanoTime();
        try (RawClient c = new RawClient(port)) {
            RawClient.Frame f = switch (kind) {
                case 0 -> c.read(); // silent
                case 1 -> { // half a HELLO
                    c.send(Arrays.copyOf(hello, 1 + random.nextInt(hello.length - 1)));
                    yield c.read();
                }
                case 2 -> slowLoris(c, hello, random);
                case 3 -> { // the header of the largest frame allowed before a HELLO, and no body
                    c.send(ByteBuffer.allocate(4 + Wire.HEADER_BYTES)
                            .putInt(HandshakeHandler.HELLO_FRAME_BYTES - 4)
                            .put(Wire.HELLO)
                            .put(new byte[3])
                            .putLong(1)
                            .putInt(0)
                            .array());
                    yield c.read();
                }
                default -> { // leaves on its own: the slot must be freed as well
                    Thread.sleep(random.nextInt(300));
                    stats.leftEarly.increment();
                    yield null;
                }
            };
            long millis = (System.nanoTime() - start) / 1_000_000;
            if (kind == 4) {
                return;
            }
            if (f == null) {
                stats.closedSilently.increment(); // a BUSY answer lost to a reset
                if (millis > GET_IN_MILLIS) {
                    stats.violations.add("a connection without HELLO was closed only after " + millis + " ms");
                }
            } else if (f.isError() && f.errorCode() == Wire.E_BUSY && f.requestId() == 0) {
                stats.busy.increment();
                Thread.sleep(50);
            } else if (f.isError() && f.errorCode() == Wire.E_AUTH && f.requestId() == 0) {
                stats.timedOut.increment();
                if (millis < HANDSHAKE_MILLIS - 10 || millis > GET_IN_MILLIS) {
                    stats.violations.add("kind " + kind + ": closed for want of a HELLO after " + millis + " ms (the "
                            + "timeout is " + HANDSHAKE_MILLIS + " ms)");
                }
                RawClient.Frame after = c.read();
                if (after != null) {
                    stats.violations.add(
                            "kind " + kind + ": after ERROR AUTH the connection got " + FuzzWire.describe(after));
                }
            } else {
                stats.violations.add("kind " + kind + ": a connection without HELLO was answered "
                        + FuzzWire.describe(f) + " after " + millis + " ms");
            }
        } catch (IOException e) {
            stats.violations.add("kind " + kind + ": " + e);
        }
    }

    /** Sends a HELLO a byte every 50 to 150 ms (it would take over a second), and returns the daemon's answer. */
    private static RawClient.Frame slowLoris(RawClient c, byte[] hello, SplittableRandom random) throws IOException {
        for (byte b : hello) {
            try {
                c.send(new byte[] {b});
            } catch (IOException closed) {
                break;
            }
            c.readTimeout(50 + random.nextInt(100));
            try {
                return c.read();
            } catch (SocketTimeoutException e) {
                // nothing yet: the next byte
            }
        }
        c.readTimeout(10_000);
        return c.read();
    }

    private record GotIn(long millis, int attempts) {}

    /** Connects and shakes hands, retrying BUSY; fails if that takes over {@link #GET_IN_MILLIS}. */
    private static GotIn getIn(int port, String token) throws Exception {
        long start = System.nanoTime();
        byte[] hello = RawClient.frame(Wire.HELLO, 1, RawClient.helloPayload(Wire.MAGIC, Wire.VERSION, token));
        for (int attempts = 1; ; attempts++) {
            try (RawClient c = new RawClient(port)) {
                c.send(hello);
                RawClient.Frame f = c.read();
                if (f != null && f.op() == (Wire.HELLO | Wire.RESPONSE)) {
                    c.send(RawClient.frame(Wire.HEALTH, 2, new byte[0]));
                    RawClient.Frame health = c.read();
                    assertTrue(
                            health != null && health.op() == (Wire.HEALTH | Wire.RESPONSE) && health.requestId() == 2,
                            () -> "a new client's HEALTH was answered " + FuzzWire.describe(health));
                    return new GotIn((System.nanoTime() - start) / 1_000_000, attempts);
                }
                if (f != null && !(f.isError() && f.errorCode() == Wire.E_BUSY && f.requestId() == 0)) {
                    fail("a new client's HELLO was answered " + FuzzWire.describe(f));
                }
            } catch (IOException e) {
                // refused and reset while sending: try again
            }
            long millis = (System.nanoTime() - start) / 1_000_000;
            if (millis > GET_IN_MILLIS) {
                fail("a new client retrying BUSY could not get in for " + millis + " ms (" + attempts + " attempts): "
                        + "connections without a HELLO kept the slots past the handshake timeout of " + HANDSHAKE_MILLIS
                        + " ms");
            }
            Thread.sleep(5);
        }
    }

    /** How the healthy client fared: its rounds, the pages it verified after the phase, its failure if any. */
    private record Healthy(int rounds, int pages, AssertionError failure) {
        void assertOk() {
            if (failure != null) {
                throw failure;
            }
            assertTrue(rounds > 10, "the healthy client got only " + rounds + " rounds through");
        }

        @Override
        public String toString() {
            return "healthy client: " + rounds + " rounds, " + pages + " pages verified after"
                    + (failure == null ? "" : ", FAILED: " + failure.getMessage());
        }
    }

    private interface Body {
        void run(HealthyClient healthy) throws Exception;
    }

    /** Runs {@code body} beside a healthy client, then stops it and checks every page it was told OK for. */
    private static Healthy beside(TestDaemon d, long seed, Body body) throws Exception {
        try (RemotePageStore store = d.client();
                HealthyClient healthy = new HealthyClient(store, PAGE, HEALTHY_MAX_PAGES, seed)) {
            openAllConnections(d, store);
            healthy.start();
            body.run(healthy);
            try {
                healthy.stop();
                healthy.verifyAll();
                return new Healthy(healthy.rounds(), healthy.pagesAcknowledged(), null);
            } catch (AssertionError e) {
                return new Healthy(healthy.rounds(), healthy.pagesAcknowledged(), e);
            }
        }
    }

    /** Makes the client open every connection it keeps, so that none has to be opened while the slots are taken. */
    private static void openAllConnections(TestDaemon d, RemotePageStore store) throws Exception {
        for (int i = 0; i < 2 * HEALTHY_CONNECTIONS; i++) {
            assertTrue(
                    store.daemonHealthy(Deadline.after(Duration.ofSeconds(10))).get(30, TimeUnit.SECONDS));
        }
        FuzzLeaks.awaitConnections(d.server, HEALTHY_CONNECTIONS, 5_000);
    }

    /* ---------------------------------------------------------------- phase 2: partial frames */

    private static final String PARTIAL_BUDGET_SETTING = "server.max-partial-frame-bytes";
    private static final int MAX_FRAME = 4 << 20;
    /** Room for two stalled frames and the healthy client's (which would be refused BUSY without it). */
    private static final long PARTIAL_BUDGET = 2L * MAX_FRAME + (1 << 20);

    private static final int STALLERS = 24;
    /** Bytes of its frame each staller sends before it stalls. */
    private static final int SENT = 3 << 20;

    private static final long MEMORY_SLACK = 16L << 20;

    /** How a stalled frame's connection stands. */
    private enum Stall {
        HELD,
        REFUSED_BUSY,
        CLOSED_SILENTLY,
        REFUSED_OTHERWISE
    }

    /** A connection with a frame stalled on it; {@code answered} if the daemon answered (or closed) at once. */
    private record Staller(RawClient client, boolean answered, RawClient.Frame answer) {}

    /** What phase 2 saw. */
    private static final class PartialFrames {
        final List<Stall> first = new ArrayList<>();
        final List<Stall> second = new ArrayList<>();
        final List<String> violations = new ArrayList<>();
        long declared;
        long before;
        long peak;
    }

    @Test
    void partlyReceivedFramesHoldAtMostTheDaemonWideBudget() throws Exception {
        SplittableRandom random = new SplittableRandom(SEED ^ 0x2222);
        PartialFrames seen = new PartialFrames();
        try (TestDaemon d = TestDaemon.start(Map.of(
                "server.store",
                "none",
                "server.host-size",
                "64MiB",
                "server.max-page-bytes",
                "1MiB",
                "server.max-frame-bytes",
                Integer.toString(MAX_FRAME),
                PARTIAL_BUDGET_SETTING,
                Long.toString(PARTIAL_BUDGET)))) {
            Healthy healthy = beside(d, random.nextLong(), client -> stallFrames(d, random, seen));
            System.out.printf(
                    "phase 2 (partial frames): %d frames declaring %d MiB in all, %d MiB of them sent; first "
                            + "wave %s; second wave %s; direct memory %d MiB before, peak %d MiB (budget %d MiB); %s%n",
                    STALLERS,
                    seen.declared >> 20,
                    ((long) STALLERS * SENT) >> 20,
                    count(seen.first),
                    count(seen.second),
                    seen.before >> 20,
                    seen.peak >> 20,
                    PARTIAL_BUDGET >> 20,
                    healthy);
            int held = count(seen.first, Stall.HELD);
            assertAll(
                    "partial frames over the daemon-wide budget",
                    () -> assertTrue(
                            ServerConfig.SETTINGS.stream().anyMatch(s -> s.key().equals(PARTIAL_BUDGET_SETTING)),
                            "the daemon does not know " + PARTIAL_BUDGET_SETTING + " (docs/protocol.md, section 1): "
                                    + "the embedded daemon ran without a budget for partly received frames"),
                    healthy::assertOk,
                    () -> assertTrue(
                            seen.violations.isEmpty(),
                            () -> "stalled frames got what they should not: " + seen.violations),
                    () -> assertTrue(
                            seen.peak - seen.before <= PARTIAL_BUDGET + MEMORY_SLACK,
                            "direct memory grew by "
                                    + ((seen.peak - seen.before) >> 20) + " MiB while " + STALLERS
                                    + " frames declaring "
                                    + (seen.declared >> 20) + " MiB stalled; the budget is " + (PARTIAL_BUDGET >> 20)
                                    + " MiB"),
                    () -> assertTrue(
                            held >= 1 && held <= 2,
                            held + " of " + STALLERS + " stalled frames of about "
                                    + (MAX_FRAME >> 20) + " MiB were held at once; a budget of "
                                    + (PARTIAL_BUDGET >> 20)
                                    + " MiB holds 1 or 2"),
                    () -> assertTrue(
                            count(seen.first, Stall.REFUSED_BUSY) >= 1,
                            "no connection over the budget was answered ERROR BUSY"),
                    () -> assertEquals(
                            List.of(Stall.HELD, Stall.HELD),
                            seen.second,
                            "after the first wave closed, two frames of the largest size must fit the budget again"));
            FuzzLeaks.awaitQuiet(d.server);
        }
        FuzzLeaks.assertNoLeaksAndTheDetectorWorks();
    }

    /**
     * A first wave of {@link #STALLERS} frames declared near the limit, held for 1.5 s and then closed, and a second
     * wave of two, which must fit the budget the first gave back; direct memory watched all along.
     */
    private static void stallFrames(TestDaemon d, SplittableRandom random, PartialFrames seen) throws Exception {
        seen.before = FuzzLeaks.usedDirectMemory();
        try (FuzzLeaks.MemoryWatch memory = new FuzzLeaks.MemoryWatch()) {
            List<Staller> wave = new ArrayList<>();
            try {
                for (int i = 0; i < STALLERS; i++) {
                    int length = MAX_FRAME - 4 - random.nextInt(64 * 1024); // within the limit, length field or not
                    seen.declared += length;
                    wave.add(stall(d.port(), length, random));
                }
                Thread.sleep(1_500); // the healthy client goes on meanwhile
                for (Staller s : wave) {
                    seen.first.add(standing(s, seen.violations));
                }
            } finally {
                closeAll(wave);
            }
            FuzzLeaks.awaitConnections(d.server, HEALTHY_CONNECTIONS, 5_000);
            List<Staller> again = new ArrayList<>();
            try {
                for (int i = 0; i < 2; i++) {
                    again.add(stall(d.port(), MAX_FRAME - 4, random));
                }
                Thread.sleep(300);
                for (Staller s : again) {
                    seen.second.add(standing(s, seen.violations));
                }
            } finally {
                closeAll(again);
            }
            seen.peak = memory.stop();
        }
    }

    /**
     * An authenticated connection that starts a PUT frame declaring {@code length} bytes, sends its first 4 KiB,
     * and, unless the daemon answers within 50 ms, up to {@link #SENT} bytes of it; then it stalls.
     */
    private static Staller stall(int port, int length, SplittableRandom random) throws IOException {
        RawClient c = new RawClient(port).hello("");
        byte[] start = new byte[4 + 4096];
        random.nextBytes(start);
        ByteBuffer.wrap(start)
                .putInt(length)
                .put(Wire.PUT)
                .put(new byte[3])
                .putLong(7)
                .putInt(0);
        c.send(start);
        c.readTimeout(50);
        try {
            return new Staller(c, true, c.read());
        } catch (SocketTimeoutException e) {
            // not refused at once: send most of the frame
        }
        byte[] chunk = new byte[256 * 1024];
        try {
            for (int sent = start.length; sent < SENT; sent += chunk.length) {
                random.nextBytes(chunk);
                c.send(chunk);
            }
        } catch (IOException closed) {
            // refused meanwhile: standing() reads why
        }
        return new Staller(c, false, null);
    }

    /** Whether the daemon still holds a stalled frame's connection, or refused it (as it should, with ERROR BUSY). */
    private static Stall standing(Staller s, List<String> violations) throws IOException {
        RawClient.Frame f = s.answer();
        if (!s.answered()) {
            s.client().readTimeout(300);
            try {
                f = s.client().read();
            } catch (SocketTimeoutException e) {
                return Stall.HELD;
            }
        }
        if (f == null) {
            return Stall.CLOSED_SILENTLY;
        }
        if (!(f.isError() && f.errorCode() == Wire.E_BUSY && f.requestId() == 0)) {
            violations.add("a stalled frame was answered " + FuzzWire.describe(f));
            return Stall.REFUSED_OTHERWISE;
        }
        return Stall.REFUSED_BUSY;
    }

    private static int count(List<Stall> stalls, Stall which) {
        return (int) stalls.stream().filter(s -> s == which).count();
    }

    private static String count(List<Stall> stalls) {
        StringBuilder b = new StringBuilder();
        for (Stall s : Stall.values()) {
            b.append(b.isEmpty() ? "" : ", ")
                    .append(count(stalls, s))
                    .append(' ')
                    .append(s.name().toLowerCase());
        }
        return b.toString();
    }

    private static void closeAll(List<Staller> stallers) throws IOException {
        for (Staller s : stallers) {
            s.client().close();
        }
    }
}
