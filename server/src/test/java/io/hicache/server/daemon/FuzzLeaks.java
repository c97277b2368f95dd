package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufAllocatorMetricProvider;
import io.netty.buffer.Unpooled;
import io.netty.util.ResourceLeakDetector;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * What the fuzz tests share: Netty's paranoid leak detection with its reports caught (and a check that they do reach
 * the test), the direct memory Netty's allocator holds, and a wait for a daemon to have no connection, request or
 * lease left. {@link #watch} and {@link #stopWatching} bracket a test class's run. Thread-safe.
 */
final class FuzzLeaks {
    private static final Logger LEAK_LOG = Logger.getLogger(ResourceLeakDetector.class.getName());
    private static final ConcurrentLinkedQueue<String> LEAKS = new ConcurrentLinkedQueue<>();
    private static final Handler LEAK_CATCHER = new Handler() {
        @Override
        public void publish(LogRecord r) {
            if (r.getMessage() != null && r.getMessage().contains("LEAK")) {
                LEAKS.add(r.getMessage());
            }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
    };
    private static ResourceLeakDetector.Level levelBefore;

    private FuzzLeaks() {}

    /** Turns paranoid leak detection on and starts catching its reports. */
    static synchronized void watch() {
        levelBefore = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        LEAK_LOG.addHandler(LEAK_CATCHER);
        LEAKS.clear();
    }

    /** Undoes {@link #watch}. */
    static synchronized void stopWatching() {
        LEAK_LOG.removeHandler(LEAK_CATCHER);
        ResourceLeakDetector.setLevel(levelBefore);
    }

    /** Fails if a buffer was reported leaked, then checks that a buffer leaked on purpose is reported. */
    static void assertNoLeaksAndTheDetectorWorks() throws InterruptedException {
        provokeLeakReports();
        assertTrue(LEAKS.isEmpty(), () -> LEAKS.size() + " leak reports, the first:\n" + LEAKS.peek());
        // Without this, a quiet leak log could mean the reports never reached us.
        ByteBufAllocator.DEFAULT.directBuffer(64).writeLong(42);
        for (int attempt = 0; attempt < 20 && LEAKS.isEmpty(); attempt++) {
            provokeLeakReports();
        }
        assertTrue(!LEAKS.isEmpty(), "a buffer leaked on purpose was not reported: leak reports do not reach the test");
        LEAKS.clear();
    }

    /** Collects garbage and allocates, which is when Netty reports buffers collected unreleased. */
    private static void provokeLeakReports() throws InterruptedException {
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(50);
            for (int j = 0; j < 200; j++) {
                ByteBufAllocator.DEFAULT.directBuffer(128).release();
                Unpooled.buffer(16).release();
            }
        }
    }

    /** Direct memory Netty's default allocator holds (the daemon's buffers and the Java client's). */
    static long usedDirectMemory() {
        return ByteBufAllocator.DEFAULT instanceof ByteBufAllocatorMetricProvider m
                ? m.metric().usedDirectMemory()
                : 0;
    }

    /** Samples {@link #usedDirectMemory} every 2 ms until stopped (or closed); {@link #peak} is the most seen. */
    static final class MemoryWatch implements AutoCloseable {
        private final AtomicBoolean stop = new AtomicBoolean();
        /** What the allocator held when the watch began: pool chunks earlier tests of this JVM left it. */
        private final long start = usedDirectMemory();

        private final AtomicLong peak = new AtomicLong(start);
        private final Thread thread = Thread.ofPlatform()
                .daemon()
                .name("fuzz-memory-watch")
                .start(() -> {
                    while (!stop.get()) {
                        peak.accumulateAndGet(usedDirectMemory(), Math::max);
                        try {
                            Thread.sleep(2);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                });

        long peak() {
            return peak.get();
        }

        /** How far the peak rose above what the allocator held when the watch began. */
        long rise() {
            return peak.get() - start;
        }

        /** Stops sampling and returns the peak. */
        long stop() {
            stop.set(true);
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return peak();
        }

        @Override
        public void close() {
            stop();
        }
    }

    /** Waits up to 10 s until the daemon has no connection, request or lease left, and fails if it still has. */
    static void awaitQuiet(HiCacheServer server) throws InterruptedException {
        awaitConnections(server, 0, 10_000);
        long end = System.nanoTime() + 10_000_000_000L;
        while ((server.inFlight.get() != 0 || server.leases.active() != 0) && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(0, server.inFlight.get(), "requests left in flight");
        assertEquals(0, server.leases.active(), "leases left");
    }

    /** Waits up to {@code millis} until the daemon counts {@code n} connections, and fails if it does not. */
    static void awaitConnections(HiCacheServer server, int n, long millis) throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000L;
        while (server.metrics.connections.get() != n && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(
                n,
                server.metrics.connections.get(),
                "connections open " + millis + " ms after they should have closed");
    }
}
