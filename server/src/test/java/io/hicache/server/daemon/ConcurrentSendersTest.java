package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Many threads sending at once over one connection: every request must reach the daemon as a whole frame. A
 * request's header and payload once went out as two writes, which threads could interleave on the wire (the daemon
 * then read a length out of another request's bytes and refused a "frame over the limit").
 */
class ConcurrentSendersTest {
    private static final int THREADS = 12;
    private static final int ROUNDS = 150;
    private static final int PAGE = 4096;

    @Test
    void requestsFromManyThreadsOnOneConnectionArriveWhole() throws Exception {
        try (TestDaemon daemon = TestDaemon.start(Map.of());
                RemotePageStore store = RemotePageStore.open(
                        new RemoteStoreConfig("127.0.0.1", daemon.port(), "", 1, Duration.ofSeconds(5)));
                Pages pages = new Pages()) {
            Namespace ns = Pages.namespace("senders");
            List<StoreKey> keys = pages.keys(ns, 64);
            assertEquals(
                    PageStatus.OK,
                    Pages.put(store, pages.filled(keys.subList(0, 32), PAGE)).status(0));
            ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                int first = t;
                threads.add(Thread.ofPlatform().start(() -> {
                    try (Pages mine = new Pages()) {
                        start.await();
                        for (int round = 0; round < ROUNDS; round++) {
                            List<StoreKey> two =
                                    List.of(keys.get((first + round) % 64), keys.get((first * 7 + round) % 64));
                            BatchResult got = Pages.get(store, mine.empty(two, PAGE));
                            for (int i = 0; i < two.size(); i++) {
                                boolean stored = keys.indexOf(two.get(i)) < 32;
                                if (got.status(i) != (stored ? PageStatus.OK : PageStatus.MISS)) {
                                    problems.add("round " + round + ": " + got);
                                }
                            }
                        }
                    } catch (Exception e) {
                        problems.add(e.toString());
                    }
                }));
            }
            start.countDown();
            for (Thread thread : threads) {
                thread.join(TimeUnit.MINUTES.toMillis(2));
            }
            assertEquals(List.of(), List.copyOf(problems).subList(0, Math.min(3, problems.size())));
        }
    }
}
