package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.storage.remote.RemotePageStore;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The protocol fuzz's phases on deadlines and races, against a daemon with a tiny host slab (so that pages go to L3),
 * each beside a {@link HealthyClient} that must see every operation succeed during the phase and every acknowledged
 * page intact after it, under Netty's paranoid leak detection:
 * <ol start="3">
 *   <li>every operation (GET, LEASE, LEADING_HITS, PUT, DELETE, CLEAR of fuzz namespaces) with a deadline of 1 to 5
 *       ms, against the slow {@code delaying} L3 and against the file store: answers are well formed and their
 *       statuses tell the truth (docs/protocol.md, section 1): never OK for a page not stored, TIMED_OUT rather than
 *       MISS for one that is, nothing acknowledged lost and nothing acknowledged as removed still there;
 *   <li>connections race PUT, DELETE and CLEAR of the same few pages, with short and normal deadlines; each also
 *       pipelines PUT, GET, DELETE of a page of its own namespace, which must take effect in that order (section 1);
 *       after the race every raced page is either intact or gone, and once deleted stays gone.
 * </ol>
 * The seed is printed; set {@code -Dfuzz.seed=N} to replay a run.
 */
class ProtocolDeadlineRaceFuzzTest {
    private static final long SEED = Long.getLong("fuzz.seed", System.nanoTime());
    private static final int PAGE = FuzzWire.PAGE;
    private static final Map<String, String> TINY_SLAB =
            Map.of("server.host-size", "512KiB", "server.max-page-bytes", "16KiB");

    @BeforeAll
    static void paranoid() {
        System.out.println("ProtocolDeadlineRaceFuzzTest seed " + SEED + " (replay with -Dfuzz.seed=" + SEED + ")");
        FuzzLeaks.watch();
    }

    @AfterAll
    static void restore() {
        FuzzLeaks.stopWatching();
    }

    private static Map<String, String> settings(Map<String, String> store) {
        Map<String, String> all = new HashMap<>(TINY_SLAB);
        all.putAll(store);
        return all;
    }

    /**
     * Runs {@code fuzzers} fuzz loops against a daemon with {@code store} for {@code millis}, beside a healthy client,
     * then checks the healthy client, {@code after} (with the daemon still up) and that nothing leaked.
     */
    private static void phase(
            String name, Map<String, String> store, int fuzzers, long millis, Fuzzer fuzzer, After after)
            throws Exception {
        SplittableRandom random = new SplittableRandom(SEED ^ name.hashCode());
        try (TestDaemon d = TestDaemon.start(settings(store))) {
            long[] done = new long[fuzzers];
            int rounds;
            try (RemotePageStore client = d.client();
                    HealthyClient healthy = new HealthyClient(client, PAGE, Integer.MAX_VALUE, random.nextLong())) {
                healthy.start();
                long end = System.nanoTime() + millis * 1_000_000;
                List<Future<Long>> running = new ArrayList<>();
                try (ExecutorService pool = Executors.newFixedThreadPool(fuzzers)) {
                    for (int i = 0; i < fuzzers; i++) {
                        SplittableRandom r = random.split();
                        int n = i;
                        running.add(pool.submit(() -> {
                            try (RawClient c = new RawClient(d.port()).hello(d.server.config.authToken())) {
                                return fuzzer.run(d, c, n, r, end);
                            }
                        }));
                    }
                    for (int i = 0; i < fuzzers; i++) {
                        done[i] = running.get(i).get(millis + 60_000, TimeUnit.MILLISECONDS);
                    }
                }
                rounds = healthy.stop();
                healthy.verifyAll();
                System.out.printf(
                        "%s: fuzz rounds %s; healthy client: %d rounds, %d pages verified after%n",
                        name, Arrays.toString(done), rounds, healthy.pagesAcknowledged());
            }
            assertTrue(rounds > 10, "the healthy client got only " + rounds + " rounds through");
            after.check(d);
            FuzzLeaks.awaitQuiet(d.server);
        }
        FuzzLeaks.assertNoLeaksAndTheDetectorWorks();
    }

    private interface Fuzzer {
        /** Fuzzes on {@code c} until {@code end} (System.nanoTime); returns the rounds done. */
        long run(TestDaemon d, RawClient c, int index, SplittableRandom r, long end) throws Exception;
    }

    private interface After {
        void check(TestDaemon d) throws Exception;
    }

    /* ---------------------------------------------------------------- phase 3: short deadlines on every op */

    private static final long DEADLINE_PHASE_MILLIS = 6_000;

    @Test
    void shortDeadlinesTellTheTruthWithASlowL3() throws Exception {
        String shared = "fuzz-deadlines-" + UUID.randomUUID();
        try {
            deadlines(
                    "phase 3 (short deadlines, delaying L3)",
                    Map.of("server.store", "delaying", "delaying.shared", shared, "delaying.delay", "3ms"));
        } finally {
            DelayingPageStore.drop(shared);
        }
    }

    @Test
    void shortDeadlinesTellTheTruthWithTheFileStore() throws Exception {
        deadlines("phase 3 (short deadlines, file L3)", Map.of("server.store", "file"));
    }

    private static void deadlines(String name, Map<String, String> store) throws Exception {
        FuzzBurst.Violations violations = new FuzzBurst.Violations("answers that do not tell the truth");
        try {
            deadlinePhase(name, store, violations);
        } finally {
            report(name, violations);
        }
        assertNull(violations.report());
    }

    /** Prints what the fuzz exercised and what it found wrong (before any assertion fails on it). */
    private static void report(String name, FuzzBurst.Violations... all) {
        for (FuzzBurst.Violations v : all) {
            System.out.println(name + ", outcomes: " + v.tally());
            if (v.report() != null) {
                System.out.println(name + ": " + v.report());
            }
        }
    }

    private static void deadlinePhase(String name, Map<String, String> store, FuzzBurst.Violations violations)
            throws Exception {
        phase(
                name,
                store,
                2,
                DEADLINE_PHASE_MILLIS,
                (d, c, index, r, end) -> {
                    AtomicLong ids = new AtomicLong();
                    Deque<List<StoreKey>> past = new ArrayDeque<>();
                    long rounds = 0;
                    try (FileChannel slab = FileChannel.open(d.server.cache.space.file(), StandardOpenOption.READ)) {
                        while (System.nanoTime() < end) {
                            new FuzzDeadlineRound(
                                            c,
                                            ids,
                                            r,
                                            slab,
                                            d.server.cache.space.slabBytes(),
                                            past,
                                            violations,
                                            name + ", connection " + index + ", round " + rounds)
                                    .run();
                            rounds++;
                        }
                    }
                    return rounds;
                },
                d -> {});
    }

    /* ---------------------------------------------------------------- phase 4: races */

    private static final long RACE_PHASE_MILLIS = 8_000;
    private static final int RACERS = 4;
    private static final int RACED_PAGES = 6;

    @Test
    void racingWritesOfTheSamePagesLeaveThemIntactOrGone() throws Exception {
        FuzzBurst.Violations violations = new FuzzBurst.Violations("answers that do not tell the truth");
        FuzzBurst.Violations ordering = new FuzzBurst.Violations(
                "pipelined writes of one connection that did not take " + "effect in the order sent");
        Namespace ns = Pages.namespace("fuzz-race");
        List<StoreKey> raced = FuzzBurst.keys(ns, RACED_PAGES, new SplittableRandom(SEED));
        String name = "phase 4 (races)";
        try {
            race(name, raced, violations, ordering);
        } finally {
            report(name, ordering, violations);
        }
        assertAll(name, () -> assertNull(ordering.report()), () -> assertNull(violations.report()));
    }

    private static void race(
            String name, List<StoreKey> raced, FuzzBurst.Violations violations, FuzzBurst.Violations ordering)
            throws Exception {
        phase(
                name,
                Map.of("server.store", "file"),
                RACERS,
                RACE_PHASE_MILLIS,
                (d, c, index, r, end) -> {
                    FuzzRacer racer = new FuzzRacer(c, r, raced, violations, ordering, name + ", racer " + index);
                    long rounds = 0;
                    while (System.nanoTime() < end) {
                        racer.burst(rounds++);
                    }
                    racer.finish(rounds);
                    return rounds;
                },
                d -> {
                    try (RawClient c = new RawClient(d.port()).hello(d.server.config.authToken())) {
                        FuzzRacer.settled(c, raced, violations);
                    }
                });
    }
}
