package io.hicache.core.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class KvEventSinkTest {
    private static KvEvent removed(long id) {
        return new BlockRemoved(new long[] {id}, Medium.GPU);
    }

    private static List<Long> ids(List<KvEvent> events) {
        List<Long> out = new ArrayList<>();
        for (KvEvent e : events) {
            out.add(((BlockRemoved) e).blockHash(0));
        }
        return out;
    }

    @Test
    void eventsArriveInOrderInBatchesOnTheSinksThread() throws Exception {
        KvEventCollector collector = new KvEventCollector();
        List<String> threads = new ArrayList<>();
        KvEventPublisher recording = new KvEventPublisher() {
            @Override
            public void publish(KvEventBatch batch) {
                threads.add(Thread.currentThread().getName());
                collector.publish(batch);
            }

            @Override
            public void close() {
                collector.close();
            }
        };
        try (KvEventSink sink = KvEventSink.over("kv-events-test", recording, 10_000)) {
            assertTrue(sink.enabled());
            List<Long> sent = new ArrayList<>();
            for (long i = 0; i < 3000; i++) {
                sink.emit(removed(i));
                sent.add(i);
            }
            assertTrue(sink.awaitIdle(Duration.ofSeconds(10)));
            List<KvEventBatch> batches = collector.drain();
            List<KvEvent> all = new ArrayList<>();
            double lastTs = 0;
            for (KvEventBatch b : batches) {
                assertTrue(b.events().size() <= KvEventSink.MAX_BATCH_EVENTS);
                assertTrue(b.timestampSeconds() >= lastTs && b.timestampSeconds() > 1.7e9, "wall clock seconds");
                lastTs = b.timestampSeconds();
                all.addAll(b.events());
            }
            assertEquals(sent, ids(all));
            assertTrue(batches.size() >= 3, "at most " + KvEventSink.MAX_BATCH_EVENTS + " a batch");
            assertTrue(threads.stream().allMatch("hicache-kv-events-test"::equals), threads::toString);
            assertEquals(new KvEventSink.Stats(0, 0, batches.size(), 3000, 0), sink.stats());
        }
    }

    @Test
    void aStuckPublisherNeverBlocksTheEmitterAndTheOldestEventsAreDropped() throws Exception {
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        KvEventCollector collector = new KvEventCollector();
        KvEventPublisher stuck = new KvEventPublisher() {
            @Override
            public void publish(KvEventBatch batch) {
                entered.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                collector.publish(batch);
            }

            @Override
            public void close() {}
        };
        try (KvEventSink sink = KvEventSink.over("kv-events-test", stuck, 100)) {
            sink.emit(removed(-1));
            assertTrue(entered.await(10, TimeUnit.SECONDS), "the thread took the first batch and is stuck in it");
            long start = System.nanoTime();
            for (long i = 0; i < 1000; i++) {
                sink.emit(removed(i));
            }
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "emitting never waits");
            assertEquals(900, sink.stats().droppedEvents());
            assertEquals(100, sink.stats().queuedEvents());
            release.countDown();
            assertTrue(sink.awaitIdle(Duration.ofSeconds(10)));
            List<Long> expected = new ArrayList<>();
            expected.add(-1L);
            for (long i = 900; i < 1000; i++) {
                expected.add(i); // the newest 100: a router resynchronises from what is current
            }
            assertEquals(expected, ids(collector.drainEvents()));
        }
    }

    @Test
    void aFailingPublisherIsCountedAndTheThreadGoesOn() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        KvEventCollector collector = new KvEventCollector();
        KvEventPublisher flaky = new KvEventPublisher() {
            @Override
            public void publish(KvEventBatch batch) {
                if (calls.incrementAndGet() == 1) {
                    throw new IllegalStateException("subscriber gone");
                }
                collector.publish(batch);
            }

            @Override
            public void close() {}
        };
        try (KvEventSink sink = KvEventSink.over("kv-events-test", flaky, 100)) {
            sink.emit(removed(1));
            assertTrue(sink.awaitIdle(Duration.ofSeconds(10)));
            sink.emit(removed(2));
            assertTrue(sink.awaitIdle(Duration.ofSeconds(10)));
            assertEquals(1, sink.stats().failedBatches());
            assertEquals(List.of(2L), ids(collector.drainEvents()), "the thread survived the failure");
        }
    }

    @Test
    void closingPublishesWhatIsQueuedThenClosesThePublisherAndIgnoresLaterEvents() throws Exception {
        KvEventCollector collector = new KvEventCollector();
        KvEventSink sink = KvEventSink.over("kv-events-close-test", collector, 1000);
        BlockStored stored = new BlockStored(
                new long[] {5, 6}, OptionalLong.of(4), new int[] {1, 2, 3, 4}, 2, OptionalInt.empty(), Medium.CPU);
        sink.emit(stored);
        sink.emit(new AllBlocksCleared());
        sink.close();
        sink.close();
        sink.emit(removed(9));
        assertEquals(List.of(stored, new AllBlocksCleared()), collector.drainEvents());
        assertFalse(threadAlive("hicache-kv-events-close-test"), "the thread stopped");
    }

    @Test
    void aDisabledSinkTakesNothingAndStartsNoThread() {
        KvEventSink off = KvEventSink.disabled();
        assertFalse(off.enabled());
        off.emit(removed(1));
        assertEquals(new KvEventSink.Stats(0, 0, 0, 0, 0), off.stats());
        assertTrue(off.idle());
        off.close();
    }

    private static boolean threadAlive(String name) {
        return Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().equals(name) && t.isAlive());
    }
}
