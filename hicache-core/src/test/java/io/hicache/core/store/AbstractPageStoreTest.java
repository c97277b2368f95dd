package io.hicache.core.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.usage.PageUsageIndex;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The skeleton's guarantees, shown with a backend that misbehaves on purpose. */
class AbstractPageStoreTest {
    static final StoreKey K1 = BatchTypesTest.K1;
    static final StoreKey K2 = BatchTypesTest.K2;

    /** A backend whose every answer is chosen by the test. */
    static final class ScriptedStore extends AbstractPageStore {
        final AtomicInteger backendCalls = new AtomicInteger();
        final AtomicInteger closes = new AtomicInteger();
        volatile RuntimeException thrown;
        volatile BatchResult answer;
        volatile int hits;
        volatile PageUsageIndex<String> usage;

        ScriptedStore() {
            super("scripted", "nowhere", new StoreCapabilities(Set.of(), 128, 16));
        }

        private <T> CompletableFuture<T> answer(T value) {
            backendCalls.incrementAndGet();
            if (thrown != null) {
                throw thrown;
            }
            return CompletableFuture.completedFuture(value);
        }

        @Override
        protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
            return answer(hits);
        }

        @Override
        protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
            return answer(answer);
        }

        @Override
        protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
            return answer(answer);
        }

        @Override
        protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
            return answer(answer);
        }

        @Override
        protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
            return answer(null);
        }

        @Override
        protected CompletableFuture<Void> doClearAll(Deadline deadline) {
            return answer(null);
        }

        @Override
        protected void doClose() {
            closes.incrementAndGet();
        }

        @Override
        protected Optional<PageUsageIndex<?>> usageIndex() {
            return Optional.ofNullable(usage);
        }
    }

    @Test
    void usageStatsComeFromTheStoresIndexWhenItHasOne() {
        try (ScriptedStore store = new ScriptedStore()) {
            assertEquals(-1, store.stats().storedPages(), "a store without an index cannot tell");
            assertEquals(-1, store.stats().storedBytes());
            store.usage =
                    PageUsageIndex.<String>builder(PageUsageIndex.Order.RECENCY).build();
            store.usage.insert("a", 100);
            store.usage.insert("b", 28);
            assertEquals(2, store.stats().storedPages());
            assertEquals(128, store.stats().storedBytes());
        }
    }

    private static Deadline soon() {
        return Deadline.after(Duration.ofSeconds(10));
    }

    @Test
    void aThrowingBackendGivesFailedPagesNotExceptions() {
        try (ScriptedStore store = new ScriptedStore();
                Arena arena = Arena.ofShared()) {
            store.thrown = new IllegalStateException("disk on fire");
            PageBatch batch = PageBatch.of(List.of(K1, K2), List.of(arena.allocate(8), arena.allocate(8)));
            BatchResult put = store.put(batch, soon()).join();
            assertEquals(2, put.count(PageStatus.FAILED));
            assertTrue(put.detail(0).orElseThrow().contains("disk on fire"), put.toString());
            assertEquals(0, store.leadingHits(List.of(K1), soon()).join(), "a failed query counts no hits");
            assertEquals(2, store.stats().backendErrors());
            assertEquals(2, store.stats().failedPages());
        }
    }

    @Test
    void malformedAnswersAreFailuresToo() {
        try (ScriptedStore store = new ScriptedStore();
                Arena arena = Arena.ofShared()) {
            store.answer = BatchResult.of(PageStatus.OK);
            PageBatch batch = PageBatch.of(List.of(K1, K2), List.of(arena.allocate(8), arena.allocate(8)));
            BatchResult get = store.get(batch, soon()).join();
            assertEquals(2, get.count(PageStatus.FAILED), "one outcome for two pages must not read as success");
            store.hits = 7;
            assertEquals(2, store.leadingHits(List.of(K1, K2), soon()).join(), "hits are clamped to the keys asked");
        }
    }

    @Test
    void anOverDeadlineNeverReachesTheBackend() {
        try (ScriptedStore store = new ScriptedStore();
                Arena arena = Arena.ofShared()) {
            PageBatch batch = PageBatch.of(List.of(K1), List.of(arena.allocate(8)));
            assertEquals(
                    PageStatus.TIMED_OUT,
                    store.put(batch, Deadline.expired()).join().status(0));
            Deadline cancelled = soon();
            cancelled.cancel();
            assertEquals(
                    PageStatus.CANCELLED, store.get(batch, cancelled).join().status(0));
            assertEquals(0, store.leadingHits(List.of(K1), cancelled).join());
            assertTrue(store.clearAll(Deadline.expired()).isCompletedExceptionally());
            assertEquals(0, store.backendCalls.get());
            assertEquals(2, store.stats().timedOutPages());
        }
    }

    @Test
    void badArgumentsThrowBeforeAnyIo() {
        try (ScriptedStore store = new ScriptedStore();
                Arena arena = Arena.ofShared()) {
            PageBatch tooBig = PageBatch.of(List.of(K1), List.of(arena.allocate(129)));
            var big = assertThrows(IllegalArgumentException.class, () -> store.put(tooBig, soon()));
            assertTrue(big.getMessage().contains("129 bytes, over the 128-byte maximum"), big.getMessage());
            PageBatch readOnly =
                    PageBatch.of(List.of(K1), List.of(arena.allocate(8).asReadOnly()));
            assertThrows(IllegalArgumentException.class, () -> store.get(readOnly, soon()));
            assertThrows(NullPointerException.class, () -> store.delete(Arrays.asList(K1, null), soon()));
            assertThrows(NullPointerException.class, () -> store.leadingHits(List.of(K1), null));
            assertEquals(0, store.backendCalls.get());
        }
    }

    @Test
    void closeIsOnceAndThenEveryCallFailsClearly() {
        ScriptedStore store = new ScriptedStore();
        store.close();
        store.close();
        assertEquals(1, store.closes.get());
        HiCacheException e = assertThrows(HiCacheException.class, () -> store.leadingHits(List.of(K1), soon()));
        assertEquals(ErrorCode.STORE_CLOSED, e.code());
        assertTrue(e.getMessage().contains("'scripted' at nowhere is closed"), e.getMessage());
        assertThrows(HiCacheException.class, () -> store.clearAll(soon()));
        assertEquals(0, store.stats().getPages(), "stats stay readable after close");
    }

    @Test
    void unknownStoreNamesListTheAvailableOnes() {
        HiCacheException e = assertThrows(HiCacheException.class, () -> PageStores.provider("no-such-store"));
        assertEquals(ErrorCode.STORE_UNKNOWN, e.code());
        assertTrue(e.getMessage().contains("'no-such-store'") && e.getMessage().contains("available"), e.getMessage());
    }

    @Test
    void checksumCoversEveryByte() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment page = arena.allocate(4096);
            int before = PageChecksum.of(page);
            page.set(ValueLayout.JAVA_BYTE, 4095, (byte) 1);
            assertTrue(before != PageChecksum.of(page));
        }
    }
}
