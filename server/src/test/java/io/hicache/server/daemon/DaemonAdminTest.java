package io.hicache.server.daemon;

import static io.hicache.server.daemon.Pages.deadline;
import static io.hicache.server.daemon.Pages.get;
import static io.hicache.server.daemon.Pages.hits;
import static io.hicache.server.daemon.Pages.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.storage.file.FilePageStore;
import io.hicache.storage.file.FileStoreConfig;
import io.hicache.storage.remote.DaemonAdmin;
import io.hicache.storage.remote.PageLease;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.testkit.PagePattern;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * FLUSH and STORE (docs/protocol.md §3) on a daemon with a file store, while a client puts and gets pages: no request
 * fails, the slab empties while L3 keeps the pages, and a store detached and another attached each get the pages put
 * while they were attached.
 */
class DaemonAdminTest {
    private static final int PAGE = 16 * 1024;
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    /** A client thread putting batches of fresh pages and reading each back; it records every failure. */
    private static final class Load implements AutoCloseable {
        final ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        /** Each batch's keys, in the order the batches were acknowledged. */
        final ConcurrentLinkedQueue<List<StoreKey>> batches = new ConcurrentLinkedQueue<>();

        final AtomicInteger rounds = new AtomicInteger();
        private final AtomicBoolean stop = new AtomicBoolean();
        private final Thread thread;

        Load(RemotePageStore client, Namespace ns) {
            thread = Thread.ofPlatform().name("admin-test-load").start(() -> {
                try (Pages pages = new Pages()) {
                    while (!stop.get()) {
                        List<StoreKey> keys = pages.keys(ns, 4);
                        BatchResult put = put(client, pages.filled(keys, PAGE));
                        if (put.count(PageStatus.OK) != keys.size()) {
                            failures.add("put: " + put);
                        }
                        batches.add(keys);
                        PageBatch back = pages.empty(keys, PAGE);
                        BatchResult got = get(client, back);
                        for (int i = 0; i < keys.size(); i++) {
                            if (got.status(i) != PageStatus.OK
                                    || PagePattern.firstMismatch(back.page(i), keys.get(i), 0) != -1) {
                                failures.add("get of page " + i + ": " + got);
                            }
                        }
                        rounds.incrementAndGet();
                    }
                } catch (Exception e) {
                    failures.add("load: " + e);
                }
            });
        }

        /** Waits (up to 30 s) until {@code more} rounds past now are done. */
        void awaitRounds(int more) throws InterruptedException {
            int target = rounds.get() + more;
            await(() -> rounds.get() >= target || !thread.isAlive(), "the load to run " + more + " rounds");
        }

        @Override
        public void close() {
            stop.set(true);
            try {
                thread.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            assertFalse(thread.isAlive(), "the load did not stop");
        }
    }

    @Test
    void aFlushUnderLoadEmptiesTheSlabWhileL3KeepsEveryPage() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of());
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            DaemonAdmin admin = new DaemonAdmin(client);
            Namespace ns = Pages.namespace("flush");
            List<StoreKey> keys = pages.keys(ns, 64);
            assertEquals(64, put(client, pages.filled(keys, PAGE)).count(PageStatus.OK));
            List<StoreKey> leased = pages.keys(ns, 2);
            assertEquals(2, put(client, pages.filled(leased, PAGE)).count(PageStatus.OK));
            PageLease lease = client.lease(leased, PAGE, Duration.ofSeconds(30), deadline())
                    .get(30, TimeUnit.SECONDS);
            assertEquals(PageStatus.OK, lease.status(1));

            DaemonAdmin.Flushed flushed;
            try (Load load = new Load(client, Pages.namespace("flush-load"))) {
                load.awaitRounds(3);
                flushed = admin.flush(TIMEOUT).get(60, TimeUnit.SECONDS);
                load.awaitRounds(3); // the load goes on after the flush too
                assertTrue(load.failures.isEmpty(), () -> "requests failed: " + load.failures);
            }
            assertTrue(flushed.droppedPages() >= 64, flushed::toString);
            assertTrue(flushed.keptPages() >= 2, "the leased pages stay: " + flushed);
            for (StoreKey k : keys) {
                assertNull(d.server.cache.pages.pin(k), "page " + k + " is still in the slab");
            }
            for (StoreKey k : leased) {
                SlabPage e = d.server.cache.pages.pin(k);
                assertTrue(e != null, "a leased page was flushed");
                d.server.cache.pages.unpin(e);
            }
            PageStore l3 = d.server.cache.l3.current().orElseThrow();
            assertEquals(64, hits(l3, keys), "L3 keeps every flushed page");
            long fromL3 = d.server.cache.counters.storeHits.sum();
            PageBatch back = pages.empty(keys, PAGE);
            assertEquals(64, get(client, back).count(PageStatus.OK));
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(-1, PagePattern.firstMismatch(back.page(i), keys.get(i), 0), "page " + i);
            }
            assertEquals(64, d.server.cache.counters.storeHits.sum() - fromL3, "the pages came back from L3");

            lease.close();
            // Quiet now: once the last sends and the lease have let go, a flush leaves nothing in the slab.
            await(
                    () -> {
                        try {
                            DaemonAdmin.Flushed f = admin.flush(TIMEOUT).get(60, TimeUnit.SECONDS);
                            return f.keptPages() == 0 && d.server.cache.pageCount() == 0;
                        } catch (Exception e) {
                            throw new AssertionError(e);
                        }
                    },
                    "a flush to empty the quiet slab");
        }
    }

    @Test
    void aStoreIsDetachedAndAnotherAttachedWhilePutsRun() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of());
                RemotePageStore client = d.client()) {
            // Beside the first store's folder: under server.store-root, which is by default the folder holding it.
            Path newRoot = d.fileRoot.resolve("attached");
            DaemonAdmin admin = new DaemonAdmin(client);
            Path oldRoot = d.fileRoot.resolve("store");
            Optional<DaemonAdmin.Store> shown = admin.store(TIMEOUT).get(30, TimeUnit.SECONDS);
            assertEquals("file", shown.orElseThrow().name());
            assertTrue(shown.get().location().contains(oldRoot.toString()), shown::toString);

            List<StoreKey> beforeDetach = new ArrayList<>();
            List<StoreKey> detached = new ArrayList<>();
            List<StoreKey> afterAttach = new ArrayList<>();
            try (Load load = new Load(client, Pages.namespace("swap"))) {
                load.awaitRounds(3);
                beforeDetach.addAll(keysOf(load));
                DaemonAdmin.Detached d1 = admin.detach(TIMEOUT).get(60, TimeUnit.SECONDS);
                assertEquals("file", d1.store().orElseThrow().name());
                assertEquals(0, d1.droppedWrites(), "30 s are enough to drain the write-behind");
                assertEquals(Optional.empty(), admin.store(TIMEOUT).get(30, TimeUnit.SECONDS));
                int seen = load.batches.size();
                load.awaitRounds(3);
                detached.addAll(after(load, seen));

                String unknown = refusal(admin, "nosuchstore", Map.of());
                assertTrue(unknown.contains("no page store is named 'nosuchstore'"), unknown);
                DaemonAdmin.Store attached = admin.attach("file", Map.of("file.root", newRoot.toString()), TIMEOUT)
                        .get(60, TimeUnit.SECONDS);
                assertTrue(attached.location().contains(newRoot.toString()), attached::toString);
                String twice = refusal(
                        admin,
                        "file",
                        Map.of("file.root", newRoot.resolve("other").toString()));
                assertTrue(twice.contains("attached already") && twice.contains(newRoot.toString()), twice);
                assertEquals(Optional.of(attached), admin.store(TIMEOUT).get(30, TimeUnit.SECONDS));
                seen = load.batches.size();
                load.awaitRounds(3);
                afterAttach.addAll(after(load, seen));
                assertTrue(load.failures.isEmpty(), () -> "requests failed: " + load.failures);
            }
            assertFalse(detached.isEmpty());
            assertFalse(afterAttach.isEmpty());
            await(() -> d.server.pendingWriteBehindPages() == 0, "the write-behind to the new store");
            PageStore now = d.server.cache.l3.current().orElseThrow();
            assertEquals(afterAttach.size(), Pages.stored(now, afterAttach), "pages put after the attach reach it");
            assertEquals(0, Pages.stored(now, detached), "pages put while detached are in no store");
            // The old store was closed (its root is free to open) and holds what was put before, nothing after.
            try (FilePageStore old = FilePageStore.open(FileStoreConfig.at(oldRoot))) {
                assertEquals(
                        beforeDetach.size(), Pages.stored(old, beforeDetach), "the detach drained the write-behind");
                for (StoreKey k : detached) {
                    assertFalse(Files.exists(old.fileOf(k)), "page put after the detach in the old store: " + k);
                }
                assertEquals(0, Pages.stored(old, afterAttach));
            }
        }
    }

    @Test
    void pagesL3DoesNotHaveByTheDeadlineAreKeptByAFlushAndDroppedByADetach() throws Exception {
        // Every write-behind fails and is retried: no page reaches L3.
        try (TestDaemon d = TestDaemon.start(Map.of(
                        "server.store",
                        "delaying",
                        "delaying.failed-puts",
                        "1000000",
                        "delaying.shared",
                        "admin-" + System.nanoTime()));
                RemotePageStore client = d.client();
                Pages pages = new Pages()) {
            DaemonAdmin admin = new DaemonAdmin(client);
            List<StoreKey> keys = pages.keys(Pages.namespace("unwritten"), 8);
            assertEquals(8, put(client, pages.filled(keys, PAGE)).count(PageStatus.OK));
            Duration shortTimeout = Duration.ofMillis(200);

            assertEquals(
                    new DaemonAdmin.Flushed(0, 8), admin.flush(shortTimeout).get(30, TimeUnit.SECONDS));
            DaemonAdmin.Detached detached = admin.detach(shortTimeout).get(30, TimeUnit.SECONDS);
            assertEquals("delaying", detached.store().orElseThrow().name());
            assertEquals(8, detached.droppedWrites(), detached::toString);
            await(
                    () -> d.server.cache.writeBehind.dropped.sum() == 8 && d.server.pendingWriteBehindPages() == 0,
                    "the write-behind to drop the pages");
            PageBatch back = pages.empty(keys, PAGE);
            assertEquals(8, get(client, back).count(PageStatus.OK), "the dropped writes' pages are still in the slab");
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(-1, PagePattern.firstMismatch(back.page(i), keys.get(i), 0), "page " + i);
            }
            await(
                    () -> {
                        try {
                            return admin.flush(TIMEOUT)
                                                    .get(30, TimeUnit.SECONDS)
                                                    .droppedPages()
                                            > 0
                                    && d.server.cache.pageCount() == 0;
                        } catch (Exception e) {
                            throw new AssertionError(e);
                        }
                    },
                    "a flush of the slab, now without L3");
            assertEquals(8, get(client, pages.empty(keys, PAGE)).count(PageStatus.MISS), "no tier has them any more");
        }
    }

    @Test
    void adminRequestsNeedTheTokenAndAWellFormedPayload() throws Exception {
        try (TestDaemon d = TestDaemon.start(Map.of("server.auth-token", "s3cret"))) {
            try (RawClient raw = new RawClient(d.port())) {
                raw.send(RawClient.frame(Wire.FLUSH, 5, new byte[0]));
                RawClient.Frame f = raw.read();
                assertEquals(Wire.E_AUTH, f.errorCode(), "FLUSH before HELLO");
                assertNull(raw.read(), "the connection is closed");
            }
            try (RawClient raw = new RawClient(d.port()).hello("s3cret")) {
                raw.send(RawClient.frame(Wire.STORE, 6, new byte[] {9}));
                RawClient.Frame f = raw.read();
                assertTrue(f.isError() && f.errorCode() == Wire.E_MALFORMED, "STORE 9: " + f);
                raw.send(RawClient.frame(Wire.STORE, 7, new byte[] {Wire.STORE_SHOW}));
                f = raw.read();
                assertEquals(Wire.STORE | Wire.RESPONSE, f.op(), "the connection stays");
                assertEquals(1, f.payload().get(0), "a store is attached");
            }
            assertTrue(d.server.cache.l3.attached(), "nothing was detached");
        }
    }

    /** The keys of every batch the load has put so far, in order. */
    private static List<StoreKey> keysOf(Load load) {
        List<StoreKey> keys = new ArrayList<>();
        load.batches.forEach(keys::addAll);
        return keys;
    }

    /**
     * The keys of the batches the load began after it had put {@code seen}: the batch acknowledged next may have begun
     * before, so it is left out.
     */
    private static List<StoreKey> after(Load load, int seen) {
        List<StoreKey> all = keysOf(load);
        return all.subList(Math.min(all.size(), (seen + 1) * 4), all.size());
    }

    /** The message of an ATTACH the daemon refuses. */
    private static String refusal(DaemonAdmin admin, String name, Map<String, String> settings) throws Exception {
        try {
            DaemonAdmin.Store s = admin.attach(name, settings, TIMEOUT).get(60, TimeUnit.SECONDS);
            throw new AssertionError("attached " + s);
        } catch (ExecutionException e) {
            String message = e.getCause().getMessage();
            assertTrue(message.contains("(refused)"), message);
            return message;
        }
    }

    private static void await(BooleanSupplier done, String what) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out waiting for " + what);
            Thread.sleep(10);
        }
    }
}
