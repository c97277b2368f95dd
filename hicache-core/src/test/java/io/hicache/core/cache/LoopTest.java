package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 40, part 4: a background loop (the evictor, uploader, prefetcher and host-commit loops are all {@link Loop}s)
 * whose task throws, an exception or an error, goes on with the next task and counts the failure under its name,
 * visibly in {@link HiCache#stats()}: the cache never freezes behind a dead thread (LMCache #4817's failure).
 */
class LoopTest {
    @Test
    void aTaskThatThrowsIsCountedAndTheLoopGoesOn() throws Exception {
        CacheMetrics metrics = new CacheMetrics();
        Loop<Runnable> loop = new Loop<>("test-loop", 16, Runnable::run, metrics);
        try {
            AtomicInteger ran = new AtomicInteger();
            CountDownLatch done = new CountDownLatch(1);
            assertTrue(loop.offer(() -> {
                throw new IllegalStateException("a bug in a task");
            }));
            assertTrue(loop.offer(() -> {
                throw new AssertionError("an error, not an exception");
            }));
            assertTrue(loop.offer(ran::incrementAndGet));
            assertTrue(loop.offer(done::countDown));
            assertTrue(done.await(10, TimeUnit.SECONDS), "the loop went on past the failing tasks");
            assertEquals(1, ran.get());
            assertEquals(
                    1, metrics.failures.get("test-loop: IllegalStateException").sum());
            assertEquals(1, metrics.failures.get("test-loop: AssertionError").sum());
        } finally {
            loop.close(1000);
        }
    }

    @Test
    void saysWhereItsThreadsWait() throws Exception {
        Loop<Runnable> loop = new Loop<>("stuck-loop", 16, Runnable::run, new CacheMetrics(), null, 2);
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        try {
            assertTrue(loop.offer(() -> {
                entered.countDown();
                awaitQuietly(release);
            }));
            assertTrue(entered.await(10, TimeUnit.SECONDS));
            String where = loop.whereThreadsAre(8);
            assertTrue(where.contains("hicache-stuck-loop-0") && where.contains("hicache-stuck-loop-1"), where);
            assertTrue(where.contains("LoopTest.awaitQuietly"), "the stuck task's frame is named: " + where);
            assertTrue(where.contains("WAITING"), where);
        } finally {
            release.countDown();
            loop.close(1000);
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
