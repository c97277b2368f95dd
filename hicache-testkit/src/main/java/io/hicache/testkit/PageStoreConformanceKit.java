package io.hicache.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.PagePart;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.HybridHits;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.StoreStats;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The page store conformance kit: every {@link PageStore} runs it. A store's test extends this class and
 * implements {@link #openStore()}; {@link #corrupter()} and {@link #clearAllAllowed()} adjust what runs.
 * Cases for capabilities a store does not declare are skipped, never passed.
 *
 * <p>Each case works in a fresh namespace of its own (a random model id), so the kit can run against a store
 * that holds other data; at the end it clears the namespaces it used. Only {@link #clearAllRemovesEverything}
 * touches other data, and it runs only when {@link #clearAllAllowed()} says so.
 *
 * <p>Every page's bytes are derived from its key ({@link PagePattern}) and checked byte by byte; targets start
 * filled with a sentinel so that memory a store should not have written is caught.
 *
 * <p>JUnit makes one instance per case; an instance is used by one case's threads only. The kit owns the
 * store it opens and the off-heap memory of its pages, and releases both when the case ends.
 */
@TestMethodOrder(MethodOrderer.MethodName.class)
public abstract class PageStoreConformanceKit {
    private static final int DEFAULT_PAGE_BYTES = 16 * 1024;

    /** The store under test; opened before each case, closed after it. */
    protected PageStore store;

    private final List<PageStore> extraStores = new ArrayList<>();
    private final Set<Namespace> namespaces = new LinkedHashSet<>();
    private Arena arena;
    private Namespace ns;
    private SplittableRandom random;

    /**
     * Opens the store under test. Each call must open a store on the same location, so that a second store
     * (or a reopened one) sees the first one's pages when the store declares {@link Capability#PERSISTENT}
     * or {@link Capability#SHARED}.
     */
    protected abstract PageStore openStore() throws Exception;

    /** How to damage a stored page from outside, if the store's pages can be reached; empty skips that case. */
    protected Optional<PageCorrupter> corrupter() {
        return Optional.empty();
    }

    /**
     * True where the store under test sits on a service whose overwrites of one key are not atomic (S3Proxy's
     * filesystem backend writes an object's body and its metadata apart) and whose stored bytes for one key differ from
     * put to put (the encrypted store seals each put under a fresh nonce): a get racing an overwrite of the same page
     * may then read one put's body with another's checksum, which the store rightly reports CORRUPT. The concurrency
     * case then accepts CORRUPT for such a get; it still never accepts wrong bytes as OK. Real S3 replaces an object
     * whole, so this is for test servers only. Default false.
     */
    protected boolean tornOverwritesPossible() {
        return false;
    }

    /** Whether {@link #clearAllRemovesEverything} may wipe the whole store. */
    protected boolean clearAllAllowed() {
        return true;
    }

    /** The deadline each store call gets; a call that has not completed shortly after it fails the case. */
    protected Duration operationTimeout() {
        return Duration.ofSeconds(60);
    }

    @BeforeEach
    final void openForCase(TestInfo info) throws Exception {
        arena = Arena.ofShared();
        random = new SplittableRandom(info.getDisplayName().hashCode() * 31L + System.nanoTime());
        store = assertOpened(openStore());
        ns = newNamespace();
    }

    @AfterEach
    final void cleanUpAfterCase() throws Exception {
        if (store == null) {
            arena.close();
            return; // openStore() failed; that failure is the case's result
        }
        try {
            for (PageStore s : extraStores) {
                s.close();
            }
            try {
                clearNamespacesUsed(store);
            } catch (HiCacheException closedByTheCase) {
                // Some cases close the store: clean up through a fresh one.
                try (PageStore cleaner = openStore()) {
                    clearNamespacesUsed(cleaner);
                }
            }
        } finally {
            store.close();
            arena.close();
        }
    }

    private void clearNamespacesUsed(PageStore target) {
        for (Namespace used : namespaces) {
            try {
                await(target.clear(used, deadline()));
            } catch (HiCacheException e) {
                if (e.code() == ErrorCode.STORE_CLOSED) {
                    throw e;
                }
            } catch (RuntimeException | AssertionError e) {
                // Best effort: the case has been judged already; a failing clear is judged by its own case.
            }
        }
    }

    /* ---------------------------------------------------------------- round trips */

    @ParameterizedTest(name = "{0} bytes")
    @ValueSource(ints = {4096, 16 * 1024, 64 * 1024, 256 * 1024, 2 * 1024 * 1024})
    void roundTripAtPageSize(int pageBytes) {
        assumeTrue(pageBytes <= store.capabilities().maxPageBytes(), "store's maximum page is smaller");
        List<StoreKey> keys = keys(ns, 6);
        assertAllSucceed(put(keys, pageBytes), "put");
        MemorySegment[] targets = sentinelPages(keys.size(), pageBytes);
        BatchResult got = get(keys, targets);
        for (int i = 0; i < keys.size(); i++) {
            assertEquals(PageStatus.OK, got.status(i), () -> "get " + got);
            assertPattern(targets[i], keys.get(i));
        }
    }

    @Test
    void leadingHitsStopAtTheFirstMiss() {
        List<StoreKey> keys = keys(ns, 8);
        assertAllSucceed(
                put(
                        List.of(keys.get(0), keys.get(1), keys.get(2), keys.get(4), keys.get(5), keys.get(7)),
                        DEFAULT_PAGE_BYTES),
                "put");
        assertEquals(3, hits(keys), "keys 0-2 stored, 3 missing, 4-5 stored: the count stops at 3");
        assertEquals(0, hits(keys.subList(3, 8)), "the first key is missing");
        assertEquals(2, hits(keys.subList(4, 7)));
        assertEquals(3, hits(keys.subList(0, 3)));
        assertEquals(0, hits(List.of()));
    }

    @Test
    void getOfAMissingKeyIsAMissAndLeavesTheTargetUntouched() {
        List<StoreKey> keys = keys(ns, 3);
        MemorySegment[] targets = sentinelPages(3, DEFAULT_PAGE_BYTES);
        BatchResult got = get(keys, targets);
        for (int i = 0; i < 3; i++) {
            assertEquals(PageStatus.MISS, got.status(i), got::toString);
            assertTrue(PagePattern.isSentinel(targets[i]), "a missed get wrote its target");
        }
    }

    @Test
    void putOfAStoredKeyIsIdempotent() {
        List<StoreKey> keys = keys(ns, 2);
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "first put");
        long storedBefore = store.stats().storedPages();
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "second put of the same pages");
        MemorySegment[] targets = sentinelPages(2, DEFAULT_PAGE_BYTES);
        assertEquals(2, get(keys, targets).count(PageStatus.OK));
        assertPattern(targets[0], keys.get(0));
        assertPattern(targets[1], keys.get(1));
        assertEquals(2, hits(keys));
        if (storedBefore >= 0) {
            assertEquals(storedBefore, store.stats().storedPages(), "a repeated put stored the page twice");
        }
    }

    @Test
    void mixedBatchesGiveTheRightOutcomePerKey() {
        List<StoreKey> keys = keys(ns, 5);
        assertAllSucceed(put(List.of(keys.get(0), keys.get(2)), DEFAULT_PAGE_BYTES), "put");
        // A put with stored and new keys: all end up stored.
        assertAllSucceed(put(List.of(keys.get(2), keys.get(1), keys.get(0)), DEFAULT_PAGE_BYTES), "mixed put");
        // A get of hits and misses, interleaved.
        List<StoreKey> asked = List.of(keys.get(0), keys.get(3), keys.get(1), keys.get(4), keys.get(2));
        MemorySegment[] targets = sentinelPages(5, DEFAULT_PAGE_BYTES);
        BatchResult got = get(asked, targets);
        PageStatus[] expected = {PageStatus.OK, PageStatus.MISS, PageStatus.OK, PageStatus.MISS, PageStatus.OK};
        for (int i = 0; i < 5; i++) {
            assertEquals(expected[i], got.status(i), "page " + i + " of " + got);
            if (expected[i] == PageStatus.OK) {
                assertPattern(targets[i], asked.get(i));
            } else {
                assertTrue(PagePattern.isSentinel(targets[i]), "a missed get wrote its target");
            }
        }
    }

    @Test
    void deleteRemovesOnlyTheNamedPages() {
        List<StoreKey> keys = keys(ns, 4);
        assertAllSucceed(put(keys.subList(0, 3), DEFAULT_PAGE_BYTES), "put");
        BatchResult deleted = await(store.delete(List.of(keys.get(1), keys.get(3)), deadline()));
        assertEquals(PageStatus.OK, deleted.status(0), deleted::toString);
        assertEquals(PageStatus.MISS, deleted.status(1), "deleting a key never stored: " + deleted);
        assertEquals(1, hits(keys.subList(0, 3)));
        MemorySegment[] targets = sentinelPages(3, DEFAULT_PAGE_BYTES);
        BatchResult got = get(keys.subList(0, 3), targets);
        assertEquals(List.of(PageStatus.OK, PageStatus.MISS, PageStatus.OK), statuses(got));
        assertPattern(targets[2], keys.get(2));
        assertEquals(
                PageStatus.MISS,
                await(store.delete(List.of(keys.get(1)), deadline())).status(0));
        assertAllSucceed(put(List.of(keys.get(1)), DEFAULT_PAGE_BYTES), "put after delete");
        assertEquals(3, hits(keys.subList(0, 3)));
    }

    @Test
    void clearRemovesOneNamespaceAndNoOther() {
        Namespace other = newNamespace();
        List<StoreKey> mine = keys(ns, 3);
        List<StoreKey> theirs = keys(other, 3);
        assertAllSucceed(put(mine, DEFAULT_PAGE_BYTES), "put");
        assertAllSucceed(put(theirs, DEFAULT_PAGE_BYTES), "put");
        await(store.clear(ns, deadline()));
        assertEquals(0, hits(mine));
        assertEquals(3, hits(theirs));
        MemorySegment[] targets = sentinelPages(3, DEFAULT_PAGE_BYTES);
        assertEquals(3, get(theirs, targets).count(PageStatus.OK));
        assertAllSucceed(put(mine, DEFAULT_PAGE_BYTES), "put after clear");
        assertEquals(3, hits(mine));
    }

    @Test
    void clearAllRemovesEverything() {
        assumeTrue(clearAllAllowed(), "clearing the whole store was not allowed for this run");
        Namespace other = newNamespace();
        List<StoreKey> a = keys(ns, 3);
        List<StoreKey> b = keys(other, 3);
        assertAllSucceed(put(a, DEFAULT_PAGE_BYTES), "put");
        assertAllSucceed(put(b, DEFAULT_PAGE_BYTES), "put");
        await(store.clearAll(deadline()));
        assertEquals(0, hits(a));
        assertEquals(0, hits(b));
        if (store.stats().storedPages() >= 0) {
            assertEquals(0, store.stats().storedPages());
        }
        assertAllSucceed(put(a, DEFAULT_PAGE_BYTES), "the store is usable after clearAll");
        assertEquals(3, hits(a));
    }

    @Test
    void aBatchOf1024Pages() {
        List<StoreKey> keys = keys(ns, 1024);
        assertAllSucceed(put(keys, 4096), "put");
        assertEquals(1024, hits(keys));
        MemorySegment[] targets = sentinelPages(1024, 4096);
        BatchResult got = get(keys, targets);
        assertEquals(1024, got.count(PageStatus.OK), got::toString);
        for (int i = 0; i < keys.size(); i++) {
            assertPattern(targets[i], keys.get(i));
        }
    }

    /* ---------------------------------------------------------------- concurrency */

    @Test
    void eightThreadsPutAndGetOverlappingKeys() throws Exception {
        int threads = 8;
        int rounds = 60;
        int batch = 6;
        int pageBytes = 8 * 1024;
        List<StoreKey> pool = keys(ns, 48);
        Set<StoreKey> stored = ConcurrentHashMap.newKeySet();
        ExecutorService pool8 = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Integer>> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long seed = random.nextLong();
                workers.add(pool8.submit(() -> {
                    SplittableRandom r = new SplittableRandom(seed);
                    int verified = 0;
                    for (int round = 0; round < rounds; round++) {
                        List<StoreKey> picked = new ArrayList<>();
                        for (int i = 0; i < batch; i++) {
                            picked.add(pool.get(r.nextInt(pool.size())));
                        }
                        switch (r.nextInt(3)) {
                            case 0 -> {
                                BatchResult put = put(picked, pageBytes);
                                for (int i = 0; i < batch; i++) {
                                    if (put.status(i).isSuccess()) {
                                        stored.add(picked.get(i));
                                    }
                                }
                            }
                            case 1 -> {
                                MemorySegment[] targets = sentinelPages(batch, pageBytes);
                                BatchResult got = get(picked, targets);
                                for (int i = 0; i < batch; i++) {
                                    PageStatus s = got.status(i);
                                    if (s == PageStatus.OK) {
                                        assertPattern(targets[i], picked.get(i));
                                        verified++;
                                    } else if (s != PageStatus.CORRUPT || !tornOverwritesPossible()) {
                                        assertEquals(PageStatus.MISS, s, "concurrent get: " + got);
                                        assertTrue(PagePattern.isSentinel(targets[i]), "a missed get wrote its target");
                                    }
                                }
                            }
                            default -> assertTrue(hits(picked) <= batch);
                        }
                    }
                    return verified;
                }));
            }
            int verified = 0;
            for (Future<Integer> w : workers) {
                try {
                    verified += w.get(5, TimeUnit.MINUTES);
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof AssertionError a) {
                        throw a;
                    }
                    throw e;
                }
            }
            assertTrue(verified > 0, "no concurrent get found a page: the case checked nothing");
        } finally {
            pool8.shutdownNow();
        }
        List<StoreKey> all = new ArrayList<>(stored);
        MemorySegment[] targets = sentinelPages(all.size(), pageBytes);
        BatchResult got = get(all, targets);
        for (int i = 0; i < all.size(); i++) {
            assertEquals(PageStatus.OK, got.status(i), "a page stored by one thread is readable: " + got);
            assertPattern(targets[i], all.get(i));
        }
    }

    /* ---------------------------------------------------------------- isolation and validation */

    @Test
    void namespacesAreIsolated() {
        PageHash hash = keys(ns, 1).getFirst().hash();
        StoreKey base = ns.key(hash);
        assertAllSucceed(put(List.of(base), DEFAULT_PAGE_BYTES), "put");
        List<Namespace> others = List.of(
                ns.withModelId(ns.modelId() + "-other"),
                ns.withKvDtype(KvDtype.FP8_E4M3),
                ns.withPageByteOrder(PageByteOrder.TOKEN_MAJOR),
                ns.withTensorParallel(1, 2),
                ns.withTensorParallel(0, 2),
                ns.withExtraKey("other-salt"));
        namespaces.addAll(others);
        for (Namespace other : others) {
            StoreKey twin = other.key(hash);
            assertEquals(0, hits(List.of(twin)), "same hash in " + other + " is not a hit");
            MemorySegment[] target = sentinelPages(1, DEFAULT_PAGE_BYTES);
            assertEquals(PageStatus.MISS, get(List.of(twin), target).status(0), "same hash in " + other);
            assertTrue(PagePattern.isSentinel(target[0]));
        }
        // Storing the twin leaves the original alone.
        StoreKey twin = others.getLast().key(hash);
        assertAllSucceed(put(List.of(twin), DEFAULT_PAGE_BYTES), "put twin");
        MemorySegment[] targets = sentinelPages(2, DEFAULT_PAGE_BYTES);
        assertEquals(2, get(List.of(base, twin), targets).count(PageStatus.OK));
        assertPattern(targets[0], base);
        assertPattern(targets[1], twin);
        await(store.delete(List.of(twin), deadline()));
        assertEquals(1, hits(List.of(base)), "deleting the twin removed the original");
    }

    @Test
    void theHybridPartsOfAPrefixAreStoredApartAndRestoredTogether() {
        // A hybrid model's prefix of 3 pages: KV pages, a sliding window of 2 pages, a state after a page, each part
        // under the KV page's hash in its own namespace, of its own size (docs/embedding.md, hybrid models).
        List<StoreKey> kv = keys(ns, 3);
        List<PageHash> hashes = kv.stream().map(StoreKey::hash).toList();
        Namespace window = ns.forPart(PagePart.SLIDING_WINDOW);
        Namespace state = ns.forPart(PagePart.RECURRENT_STATE);
        namespaces.add(window);
        namespaces.add(state);
        List<HybridHits.PartQuery> parts = List.of(
                new HybridHits.PartQuery(PagePart.SLIDING_WINDOW, 2),
                new HybridHits.PartQuery(PagePart.RECURRENT_STATE, 1));
        assertAllSucceed(put(kv, DEFAULT_PAGE_BYTES), "put KV");
        assertAllSucceed(put(List.of(window.key(hashes.get(1)), window.key(hashes.get(2))), 16 * 1024), "put window");
        assertAllSucceed(put(List.of(state.key(hashes.get(1))), 4096), "put state after page 1");
        assertEquals(
                0,
                HybridHits.restorablePages(store, ns, hashes, parts, deadline()),
                "a state after page 2 of 3 and a window ending at page 3: no endpoint both can restore");
        assertAllSucceed(put(List.of(state.key(hashes.get(2))), 4096), "put state after page 2");
        assertEquals(3, HybridHits.restorablePages(store, ns, hashes, parts, deadline()));
        MemorySegment[] windowPages = sentinelPages(1, 16 * 1024);
        assertEquals(
                PageStatus.OK,
                get(List.of(window.key(hashes.get(2))), windowPages).status(0));
        assertPattern(windowPages[0], window.key(hashes.get(2)));
        MemorySegment[] kvPage = sentinelPages(1, DEFAULT_PAGE_BYTES);
        assertEquals(PageStatus.OK, get(List.of(kv.get(2)), kvPage).status(0), "the KV page is its own");
        assertPattern(kvPage[0], kv.get(2));
        await(store.delete(List.of(state.key(hashes.get(2))), deadline()));
        assertEquals(3, hits(kv), "deleting a state leaves the KV");
        assertEquals(0, HybridHits.restorablePages(store, ns, hashes, parts, deadline()));
    }

    @Test
    void invalidInputIsRejectedBeforeAnyIo() {
        List<StoreKey> keys = keys(ns, 2);
        MemorySegment page = arena.allocate(DEFAULT_PAGE_BYTES);
        PagePattern.fill(page, keys.get(0));
        assertNullsRejected(keys, page);
        // Malformed keys cannot be built at all.
        assertThrows(IllegalArgumentException.class, () -> PageHash.fromHex("not-a-hash"));
        assertThrows(IllegalArgumentException.class, () -> ns.withTensorParallel(3, 2));
        // A read-only target.
        var readOnly = assertThrows(
                IllegalArgumentException.class,
                () -> store.get(PageBatch.of(keys.subList(0, 1), List.of(page.asReadOnly())), deadline()));
        assertTrue(String.valueOf(readOnly.getMessage()).contains("read-only"), readOnly.getMessage());
        // A page over the store's maximum, as a sparse mapped file: it costs no memory unless read.
        long max = store.capabilities().maxPageBytes();
        if (max < (1L << 40)) {
            MemorySegment tooBig = sparsePage(max + 1);
            var e = assertThrows(
                    IllegalArgumentException.class,
                    () -> store.put(
                            PageBatch.of(List.of(keys.get(1), keys.get(0)), List.of(page, tooBig)), deadline()));
            assertTrue(String.valueOf(e.getMessage()).contains("page 1"), e.getMessage());
            assertEquals(0, hits(keys), "a rejected batch stored nothing, not even its valid pages");
        }
        // A get into a target of the wrong size is refused per key and leaves the target alone.
        assertAllSucceed(put(keys.subList(0, 1), DEFAULT_PAGE_BYTES), "put");
        for (int wrongSize : new int[] {DEFAULT_PAGE_BYTES / 2, DEFAULT_PAGE_BYTES * 2}) {
            MemorySegment[] target = sentinelPages(1, wrongSize);
            BatchResult got = get(keys.subList(0, 1), target);
            assertEquals(PageStatus.SIZE_MISMATCH, got.status(0), got::toString);
            assertTrue(got.detail(0).isPresent(), "a size mismatch says the sizes");
            assertTrue(PagePattern.isSentinel(target[0]), "a refused get wrote its target");
        }
    }

    /** Null arguments, each refused with a {@link NullPointerException}. */
    // The SPI's parameters are non-null: passing null on purpose, to check the store refuses it, is what this does.
    @SuppressWarnings("NullAway")
    private void assertNullsRejected(List<StoreKey> keys, MemorySegment page) {
        assertThrows(NullPointerException.class, () -> store.leadingHits(null, deadline()));
        assertThrows(NullPointerException.class, () -> store.leadingHits(Arrays.asList(keys.get(0), null), deadline()));
        assertThrows(NullPointerException.class, () -> store.delete(Arrays.asList((StoreKey) null), deadline()));
        assertThrows(NullPointerException.class, () -> store.get(null, deadline()));
        assertThrows(
                NullPointerException.class, () -> store.put(PageBatch.of(keys.subList(0, 1), List.of(page)), null));
    }

    @Test
    void useAfterCloseFailsClearly() {
        List<StoreKey> keys = keys(ns, 1);
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "put");
        store.close();
        store.close();
        MemorySegment page = arena.allocate(DEFAULT_PAGE_BYTES);
        PageBatch batch = PageBatch.of(keys, List.of(page));
        List<Runnable> calls = List.of(
                () -> store.leadingHits(keys, deadline()),
                () -> store.get(batch, deadline()),
                () -> store.put(batch, deadline()),
                () -> store.delete(keys, deadline()),
                () -> store.clear(ns, deadline()),
                () -> store.clearAll(deadline()));
        for (Runnable call : calls) {
            HiCacheException e = assertThrows(HiCacheException.class, call::run);
            assertEquals(ErrorCode.STORE_CLOSED, e.code());
            String message = String.valueOf(e.getMessage());
            assertTrue(message.contains(store.name()) && message.contains("closed"), e.getMessage());
        }
        assertNotNull(store.stats(), "stats stay readable after close");
    }

    @Test
    void aCorruptedPageReadsAsAMissNeverAsWrongBytes() throws Exception {
        Optional<PageCorrupter> corrupter = corrupter();
        assumeTrue(corrupter.isPresent(), "no way to corrupt this store's pages from outside");
        List<StoreKey> keys = keys(ns, 2);
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "put");
        long corruptBefore = store.stats().corruptPages();
        corrupter.get().corrupt(store, keys.get(0));
        MemorySegment[] targets = sentinelPages(2, DEFAULT_PAGE_BYTES);
        BatchResult got = get(keys, targets);
        assertNotEquals(PageStatus.OK, got.status(0), "a corrupted page was delivered as OK");
        assertTrue(got.status(0) == PageStatus.CORRUPT || got.status(0) == PageStatus.MISS, got::toString);
        assertEquals(PageStatus.OK, got.status(1), "corrupting one page hurt another: " + got);
        assertPattern(targets[1], keys.get(1));
        if (got.status(0) == PageStatus.CORRUPT) {
            assertTrue(store.stats().corruptPages() > corruptBefore, "corruption is counted");
        }
        // The entry went with its bad bytes: a second read misses and the prefix no longer counts it.
        BatchResult again = get(keys.subList(0, 1), sentinelPages(1, DEFAULT_PAGE_BYTES));
        assertEquals(PageStatus.MISS, again.status(0), "a page found corrupt must be removed: " + again);
        assertEquals(
                0, await(store.leadingHits(keys, deadline())), "a removed corrupt page still counted as a leading hit");
        assertEquals(PageStatus.OK, put(keys.subList(0, 1), DEFAULT_PAGE_BYTES).status(0), "and can be stored again");
        MemorySegment[] fresh = sentinelPages(1, DEFAULT_PAGE_BYTES);
        assertEquals(PageStatus.OK, get(keys.subList(0, 1), fresh).status(0));
        assertPattern(fresh[0], keys.get(0));
    }

    /* ---------------------------------------------------------------- deadlines */

    @Test
    void anExpiredOrCancelledDeadlineDoesNoWork() {
        List<StoreKey> keys = keys(ns, 3);
        MemorySegment[] sources = patternPages(keys, DEFAULT_PAGE_BYTES);
        BatchResult put = await(store.put(PageBatch.of(keys, List.of(sources)), Deadline.expired()));
        assertEquals(3, put.count(PageStatus.TIMED_OUT), put::toString);
        assertEquals(0, hits(keys), "a put past its deadline stored pages");
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "put");
        Deadline cancelled = deadline();
        cancelled.cancel();
        MemorySegment[] targets = sentinelPages(3, DEFAULT_PAGE_BYTES);
        BatchResult got = await(store.get(PageBatch.of(keys, List.of(targets)), cancelled));
        assertEquals(3, got.count(PageStatus.CANCELLED), got::toString);
        for (MemorySegment t : targets) {
            assertTrue(PagePattern.isSentinel(t), "a cancelled get wrote its target");
        }
        assertEquals(0, await(store.leadingHits(keys, Deadline.expired())), "no hits are confirmed past a deadline");
        assertEquals(3, hits(keys));
    }

    /* ---------------------------------------------------------------- capabilities */

    @Test
    void aPersistentStoreKeepsItsPagesAcrossReopen() throws Exception {
        assumeTrue(store.capabilities().has(Capability.PERSISTENT), "store does not declare PERSISTENT");
        List<StoreKey> keys = keys(ns, 4);
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "put");
        store.close();
        store = assertOpened(openStore());
        assertEquals(4, hits(keys));
        MemorySegment[] targets = sentinelPages(4, DEFAULT_PAGE_BYTES);
        assertEquals(4, get(keys, targets).count(PageStatus.OK));
        for (int i = 0; i < 4; i++) {
            assertPattern(targets[i], keys.get(i));
        }
    }

    @Test
    void aSharedStoreSeesAnotherInstancesPages() throws Exception {
        assumeTrue(store.capabilities().has(Capability.SHARED), "store does not declare SHARED");
        PageStore second = assertOpened(openStore());
        extraStores.add(second);
        List<StoreKey> keys = keys(ns, 3);
        assertAllSucceed(put(keys, DEFAULT_PAGE_BYTES), "put");
        assertEquals(3, await(second.leadingHits(keys, deadline())));
        MemorySegment[] targets = sentinelPages(3, DEFAULT_PAGE_BYTES);
        BatchResult got = await(second.get(PageBatch.of(keys, List.of(targets)), deadline()));
        assertEquals(3, got.count(PageStatus.OK), got::toString);
        for (int i = 0; i < 3; i++) {
            assertPattern(targets[i], keys.get(i));
        }
        await(second.delete(keys.subList(0, 1), deadline()));
        assertEquals(0, hits(keys), "a delete through one instance is seen by the other");
    }

    @Test
    void anEvictingStoreKeepsAcceptingPutsAndStaysUnderItsCapacity() {
        assumeTrue(store.capabilities().has(Capability.EVICTING), "store does not declare EVICTING");
        assumeTrue(clearAllAllowed(), "this case fills the store, evicting pages it does not own");
        long capacity = store.stats().capacityBytes();
        assumeTrue(
                capacity > 0 && capacity <= (256L << 20),
                "the store's capacity (" + capacity
                        + " bytes) is unknown or too large to fill here; give the store under "
                        + "test 256 MiB or less to run this case");
        int pageBytes = 64 * 1024;
        int batch = 16;
        long storedBefore = store.stats().storedBytes();
        List<StoreKey> first = keys(ns, batch);
        assertAllSucceed(put(first, pageBytes), "put");
        // What one batch takes in the store, headers and padding included (the store may not have been empty).
        long batchBytes = Math.max((long) batch * pageBytes, store.stats().storedBytes() - storedBefore);
        List<StoreKey> last = first;
        long most = 0;
        int batches = (int) (3 * capacity / batchBytes) + 2;
        for (int b = 0; b < batches; b++) {
            last = keys(ns, batch);
            BatchResult put = put(last, pageBytes);
            assertEquals(
                    batch, put.count(PageStatus.OK), () -> "a store at its capacity must keep accepting puts: " + put);
            long stored = store.stats().storedBytes();
            most = Math.max(most, stored);
            assertTrue(
                    stored <= capacity + batchBytes,
                    "the store holds " + stored + " bytes, over its capacity of " + capacity
                            + " by more than one batch (" + batchBytes + " bytes)");
        }
        assertTrue(most > capacity / 2, "the case never came near the capacity: " + most + " of " + capacity);
        assertTrue(hits(first) < batch, "three capacities later, the first batch was never evicted");
        MemorySegment[] targets = sentinelPages(batch, pageBytes);
        BatchResult got = get(last, targets);
        assertEquals(batch, got.count(PageStatus.OK), () -> "the newest batch was evicted: " + got);
        for (int i = 0; i < batch; i++) {
            assertPattern(targets[i], last.get(i));
        }
    }

    @Test
    void anEvictingStoreTakesAChainsSuffixBeforeItsPrefix() {
        assumeTrue(store.capabilities().has(Capability.EVICTING), "store does not declare EVICTING");
        assumeTrue(clearAllAllowed(), "this case fills the store, evicting pages it does not own");
        long capacity = store.stats().capacityBytes();
        assumeTrue(
                capacity > 0 && capacity <= (256L << 20),
                "the store's capacity is unknown or over 256 MiB: give the store under test 256 MiB or less");
        // Pages of 1/32 of the capacity: the chain is half the store, more than one eviction takes at once (stores
        // evict to a low-water mark), so an eviction that takes the chain's prefix first leaves a hole to be seen.
        int pageBytes = (int) Math.max(
                4096, Math.min(store.capabilities().maxPageBytes(), Math.min(4L << 20, capacity / 32)) & ~4095L);
        int batch = 16;
        // A chain in one batch, first page first, then read back in one batch (the way a cache reads a prefix).
        List<StoreKey> chain = keys(ns, batch);
        assertAllSucceed(put(chain, pageBytes), "put");
        get(chain, sentinelPages(batch, pageBytes));
        int held = batch;
        int puts = (int) (3 * capacity / pageBytes) + 2;
        for (int b = 0; b < puts && held > 0; b++) {
            assertAllSucceed(put(keys(ns, 1), pageBytes), "put");
            // One page at a time, first to last: with eviction in the background the store may drop pages meanwhile,
            // but a store that drops a chain from its end can never be seen holding a page after one it lacks.
            int firstMissing = -1;
            held = 0;
            for (int i = 0; i < batch; i++) {
                boolean here = hits(List.of(chain.get(i))) == 1;
                if (!here && firstMissing < 0) {
                    firstMissing = i;
                }
                assertFalse(
                        here && firstMissing >= 0,
                        "the store holds page " + i + " of the chain but not page " + firstMissing + ": it evicted a "
                                + "page of the prefix before the suffix (leaf-first, docs/protocol.md RETAIN)");
                held += here ? 1 : 0;
            }
        }
        assertEquals(0, held, "three capacities later the chain is still there");
    }

    @Test
    void statsCountWhatHappened() {
        StoreStats before = store.stats();
        List<StoreKey> keys = keys(ns, 4);
        assertAllSucceed(put(keys.subList(0, 3), DEFAULT_PAGE_BYTES), "put");
        put(keys.subList(0, 1), DEFAULT_PAGE_BYTES);
        get(keys, sentinelPages(4, DEFAULT_PAGE_BYTES));
        hits(keys);
        StoreStats after = store.stats();
        assertEquals(4, after.putPages() - before.putPages());
        assertEquals(4, after.putStored() + after.putExisting() - before.putStored() - before.putExisting());
        assertEquals(
                (after.putStored() - before.putStored()) * DEFAULT_PAGE_BYTES,
                after.bytesWritten() - before.bytesWritten(),
                "bytes written are the pages written");
        assertEquals(4, after.getPages() - before.getPages());
        assertEquals(3, after.getHits() - before.getHits());
        assertEquals(1, after.getMisses() - before.getMisses());
        assertEquals(3 * DEFAULT_PAGE_BYTES, after.bytesRead() - before.bytesRead());
        assertEquals(1, after.leadingHitQueries() - before.leadingHitQueries());
        if (after.storedPages() >= 0 && after.storedBytes() >= 0) {
            assertTrue(after.storedPages() >= 3 && after.storedBytes() >= 3L * DEFAULT_PAGE_BYTES, after::toString);
        }
    }

    /* ---------------------------------------------------------------- helpers */

    /** A fresh namespace that this case owns and cleans up. */
    protected final Namespace newNamespace() {
        Namespace n =
                Namespace.of("conformance/" + UUID.randomUUID(), KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
        namespaces.add(n);
        return n;
    }

    /** {@code count} keys with random hashes in {@code namespace}. */
    protected final List<StoreKey> keys(Namespace namespace, int count) {
        List<StoreKey> keys = new ArrayList<>(count);
        byte[] bytes = new byte[PageHash.BYTES];
        for (int i = 0; i < count; i++) {
            random.nextBytes(bytes);
            keys.add(namespace.key(PageHash.fromBytes(bytes, 0)));
        }
        return keys;
    }

    /** A deadline of {@link #operationTimeout()} from now. */
    protected final Deadline deadline() {
        return Deadline.after(operationTimeout());
    }

    /** Waits for a store call, failing the case if it outlives its deadline by more than a few seconds. */
    protected final <T> T await(CompletableFuture<T> call) {
        try {
            return call.get(operationTimeout().toMillis() + 5_000, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            return fail("a store call did not complete within its deadline plus 5 s");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return fail("interrupted");
        } catch (ExecutionException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        }
    }

    private BatchResult put(List<StoreKey> keys, int pageBytes) {
        return await(store.put(PageBatch.of(keys, List.of(patternPages(keys, pageBytes))), deadline()));
    }

    private BatchResult get(List<StoreKey> keys, MemorySegment[] targets) {
        return await(store.get(PageBatch.of(keys, List.of(targets)), deadline()));
    }

    private int hits(List<StoreKey> keys) {
        return await(store.leadingHits(keys, deadline()));
    }

    private MemorySegment[] patternPages(List<StoreKey> keys, int pageBytes) {
        MemorySegment[] pages = new MemorySegment[keys.size()];
        for (int i = 0; i < pages.length; i++) {
            pages[i] = arena.allocate(pageBytes, 64);
            PagePattern.fill(pages[i], keys.get(i));
        }
        return pages;
    }

    private MemorySegment[] sentinelPages(int count, int pageBytes) {
        MemorySegment[] pages = new MemorySegment[count];
        for (int i = 0; i < count; i++) {
            pages[i] = arena.allocate(pageBytes, 64);
            PagePattern.fillSentinel(pages[i]);
        }
        return pages;
    }

    private MemorySegment sparsePage(long size) {
        try {
            Path file = Files.createTempFile("hicache-kit-sparse", ".page");
            try (FileChannel channel = FileChannel.open(
                    file, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.DELETE_ON_CLOSE)) {
                channel.truncate(0);
                channel.write(ByteBuffer.wrap(new byte[1]), size - 1);
                return channel.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot make a sparse file of " + size + " bytes", e);
        }
    }

    private static void assertPattern(MemorySegment page, StoreKey key) {
        long mismatch = PagePattern.firstMismatch(page, key, 0);
        if (mismatch >= 0) {
            fail("page " + key + " has wrong bytes from offset " + mismatch + " of " + page.byteSize());
        }
    }

    private static void assertAllSucceed(BatchResult result, String what) {
        assertEquals(result.size(), result.successCount(), () -> what + ": " + result);
    }

    private static List<PageStatus> statuses(BatchResult result) {
        List<PageStatus> list = new ArrayList<>(result.size());
        for (int i = 0; i < result.size(); i++) {
            list.add(result.status(i));
        }
        return list;
    }

    private static PageStore assertOpened(PageStore opened) {
        return Objects.requireNonNull(opened, "openStore() returned null");
    }
}
