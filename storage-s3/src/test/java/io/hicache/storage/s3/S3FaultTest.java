package io.hicache.storage.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.s3.client.S3Config;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The S3 store when the server misbehaves: stopped in the middle of a batch, or hanging and slow behind a proxy of the
 * test's own. Every batch must complete within its deadline plus one request timeout, with an outcome per page, and
 * the store must work again once the server does.
 */
class S3FaultTest {
    private static final String BUCKET = "hicache-faults";
    private static final Duration REQUEST_TIMEOUT = Duration.ofMillis(800);
    private static final Namespace NS = Namespace.of("faults", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);

    @TempDir
    Path dir;

    @Test
    void aServerStoppedMidBatchFailsPagesWithinTheDeadlineAndTheStoreRecovers() throws Exception {
        try (LocalS3 server = new LocalS3(dir, BUCKET);
                S3PageStore store = S3PageStore.open(
                        server.config(BUCKET).withTimeouts(REQUEST_TIMEOUT, 2).withConcurrency(4));
                Arena arena = Arena.ofShared()) {
            List<StoreKey> keys = keys(0, 64);
            Deadline deadline = Deadline.after(Duration.ofSeconds(3));
            long start = System.nanoTime();
            CompletableFuture<BatchResult> put = store.put(batch(arena, keys, 1 << 20), deadline);
            Thread.sleep(150);
            server.stop();
            BatchResult r = put.get(30, TimeUnit.SECONDS);
            assertWithin(start, Duration.ofSeconds(3).plus(REQUEST_TIMEOUT), "the batch outlived its deadline");
            assertEquals(64, r.size());
            assertTrue(r.count(PageStatus.OK) < 64, "the server stopped but every page was stored: " + r);
            for (int i = 0; i < r.size(); i++) {
                PageStatus s = r.status(i);
                assertTrue(s == PageStatus.OK || s == PageStatus.FAILED || s == PageStatus.TIMED_OUT, r::toString);
                if (s != PageStatus.OK) {
                    assertTrue(r.detail(i).isPresent(), "a failed page says why: " + r);
                }
            }
            server.start(server.port());
            List<StoreKey> again = keys(1, 8);
            BatchResult after = store.put(batch(arena, again, 64 * 1024), Deadline.after(Duration.ofSeconds(20)))
                    .get(30, TimeUnit.SECONDS);
            assertEquals(8, after.count(PageStatus.OK), "the store did not recover: " + after);
            assertEquals(8, (int) store.leadingHits(again, Deadline.after(Duration.ofSeconds(20)))
                    .get());
        }
    }

    @Test
    void aHangingServerCannotHoldABatchPastItsDeadline() throws Exception {
        try (LocalS3 server = new LocalS3(dir, BUCKET);
                DelayingProxy proxy = new DelayingProxy(server.port());
                S3PageStore store = S3PageStore.open(
                        S3Config.local(proxy.endpoint(), BUCKET, LocalS3.ACCESS_KEY, LocalS3.SECRET_KEY)
                                .withTimeouts(REQUEST_TIMEOUT, 3));
                Arena arena = Arena.ofShared()) {
            List<StoreKey> keys = keys(2, 16);
            assertEquals(
                    16,
                    store.put(batch(arena, keys, 256 * 1024), Deadline.after(Duration.ofSeconds(20)))
                            .get(30, TimeUnit.SECONDS)
                            .count(PageStatus.OK));

            proxy.hang();
            Duration budget = Duration.ofSeconds(2);
            List<MemorySegment> targets = targets(arena, 16, 256 * 1024);
            long start = System.nanoTime();
            BatchResult got = store.get(PageBatch.of(keys, targets), Deadline.after(budget))
                    .get(30, TimeUnit.SECONDS);
            assertWithin(start, budget.plus(REQUEST_TIMEOUT), "a hanging server held the get past its deadline");
            assertEquals(0, got.count(PageStatus.OK), got::toString);
            assertEquals(16, got.count(PageStatus.TIMED_OUT) + got.count(PageStatus.FAILED), got::toString);
            start = System.nanoTime();
            int hits = store.leadingHits(keys, Deadline.after(budget)).get(30, TimeUnit.SECONDS);
            assertWithin(start, budget.plus(REQUEST_TIMEOUT), "a hanging server held the lookup past its deadline");
            assertEquals(0, hits);

            proxy.delay(100);
            BatchResult slow = store.get(
                            PageBatch.of(keys.subList(0, 4), targets.subList(0, 4)),
                            Deadline.after(Duration.ofSeconds(20)))
                    .get(30, TimeUnit.SECONDS);
            assertEquals(4, slow.count(PageStatus.OK), "a slow server still serves within the deadline: " + slow);

            proxy.pass();
            List<MemorySegment> fresh = targets(arena, 16, 256 * 1024);
            BatchResult again = store.get(PageBatch.of(keys, fresh), Deadline.after(Duration.ofSeconds(20)))
                    .get(30, TimeUnit.SECONDS);
            assertEquals(16, again.count(PageStatus.OK), "the store did not recover: " + again);
            for (int i = 0; i < 16; i++) {
                assertTrue(PagePattern.matches(fresh.get(i), keys.get(i)));
            }
        }
    }

    /**
     * An answer that is not HTTP (one stray byte before it, what s3rver sends past an empty object's Content-Length
     * when a put fills the object meanwhile) is retried, as a dropped connection is; the SDK alone
     * would fail the page with a status 999 made up by Netty's decoder.
     */
    @Test
    void anAnswerThatIsNotHttpIsRetried() throws Exception {
        try (LocalS3 server = new LocalS3(dir, BUCKET);
                DelayingProxy proxy = new DelayingProxy(server.port());
                S3PageStore store = S3PageStore.open(
                        S3Config.local(proxy.endpoint(), BUCKET, LocalS3.ACCESS_KEY, LocalS3.SECRET_KEY)
                                .withConcurrency(1));
                Arena arena = Arena.ofShared()) {
            List<StoreKey> keys = keys(3, 1);
            Deadline deadline = Deadline.after(Duration.ofSeconds(20));
            proxy.garbleNextAnswer();
            assertEquals(
                    PageStatus.OK,
                    store.put(batch(arena, keys, 64 * 1024), deadline)
                            .get(30, TimeUnit.SECONDS)
                            .status(0));
            proxy.garbleNextAnswer();
            List<MemorySegment> targets = targets(arena, 1, 64 * 1024);
            BatchResult got = store.get(PageBatch.of(keys, targets), deadline).get(30, TimeUnit.SECONDS);
            assertEquals(PageStatus.OK, got.status(0), got::toString);
            assertTrue(PagePattern.matches(targets.getFirst(), keys.getFirst()));
            assertEquals(2, proxy.garbled(), "the proxy garbled no answer: the case checked nothing");
        }
    }

    private static void assertWithin(long startNanos, Duration limit, String message) {
        Duration took = Duration.ofNanos(System.nanoTime() - startNanos);
        // 300 ms of slack for scheduling on a busy 2-core machine.
        assertTrue(
                took.compareTo(limit.plusMillis(300)) <= 0,
                message + ": took " + took.toMillis() + " ms, limit " + limit.toMillis() + " ms");
    }

    private static List<StoreKey> keys(int group, int count) {
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            keys.add(NS.key(PageHash.fromHex(String.format("%08x%08x", group, i) + "0".repeat(47) + "1")));
        }
        return keys;
    }

    private static PageBatch batch(Arena arena, List<StoreKey> keys, int bytes) {
        List<MemorySegment> pages = new ArrayList<>();
        for (StoreKey k : keys) {
            MemorySegment p = arena.allocate(bytes);
            PagePattern.fill(p, k);
            pages.add(p);
        }
        return PageBatch.of(keys, pages);
    }

    private static List<MemorySegment> targets(Arena arena, int count, int bytes) {
        List<MemorySegment> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(arena.allocate(bytes));
        }
        return out;
    }
}
