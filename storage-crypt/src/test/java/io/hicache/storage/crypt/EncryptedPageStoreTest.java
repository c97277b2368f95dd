package io.hicache.storage.crypt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.core.store.StoreStats;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the encrypted store adds, over the file store opened by name as a user would: pages are ciphertext at rest;
 * tampered bytes, another key's pages and pages copied under another key are misses, counted, never bytes; keys
 * rotate; tenants get keys of their own; sizes mean the caller's page size.
 */
class EncryptedPageStoreTest {
    static final int PAGE = 64 * 1024;

    @TempDir
    Path dir;

    private Arena arena;
    private final List<PageStore> opened = new ArrayList<>();
    private final Namespace ns = Namespace.builder("crypt-test/model").build();
    private final SplittableRandom random = new SplittableRandom(42);

    @BeforeEach
    void start() {
        arena = Arena.ofShared();
    }

    @AfterEach
    void stop() {
        opened.forEach(PageStore::close);
        arena.close();
    }

    /** The encrypted store over the file store in {@code dir}, with {@code keyFile} and its active key. */
    private EncryptedPageStore open(Path keyFile, String activeKey) {
        Settings settings = Settings.builder()
                .flag("encrypted.inner", "file")
                .flag("file.root", dir.resolve("store").toString())
                .flag("encrypted.key-file", keyFile.toString())
                .flag("encrypted.active-key", activeKey)
                .build();
        EncryptedPageStore store = (EncryptedPageStore) PageStores.open(new StoreConfig("encrypted", settings));
        opened.add(store);
        return store;
    }

    private void close(PageStore store) {
        store.close();
        opened.remove(store);
    }

    private StoreKey key(Namespace namespace) {
        byte[] hash = new byte[PageHash.BYTES];
        random.nextBytes(hash);
        return namespace.key(PageHash.fromBytes(hash, 0));
    }

    private MemorySegment page(StoreKey key, int bytes) {
        MemorySegment page = arena.allocate(bytes, 64);
        PagePattern.fill(page, key);
        return page;
    }

    private MemorySegment sentinel(int bytes) {
        MemorySegment page = arena.allocate(bytes, 64);
        PagePattern.fillSentinel(page);
        return page;
    }

    private static BatchResult put(PageStore store, StoreKey key, MemorySegment page) throws Exception {
        return store.put(PageBatch.of(List.of(key), List.of(page)), deadline()).get(60, TimeUnit.SECONDS);
    }

    private static BatchResult get(PageStore store, StoreKey key, MemorySegment target) throws Exception {
        return store.get(PageBatch.of(List.of(key), List.of(target)), deadline())
                .get(60, TimeUnit.SECONDS);
    }

    private static int hits(PageStore store, StoreKey key) throws Exception {
        return store.leadingHits(List.of(key), deadline()).get(60, TimeUnit.SECONDS);
    }

    private static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    private void putOk(PageStore store, StoreKey key) throws Exception {
        BatchResult put = put(store, key, page(key, PAGE));
        assertEquals(PageStatus.OK, put.status(0), put::toString);
    }

    private void assertReads(PageStore store, StoreKey key) throws Exception {
        MemorySegment target = sentinel(PAGE);
        BatchResult got = get(store, key, target);
        assertEquals(PageStatus.OK, got.status(0), got::toString);
        assertEquals(-1, PagePattern.firstMismatch(target, key, 0), "wrong bytes");
    }

    @Test
    void pagesAreCiphertextAtRestAndReadBackWhole() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        StoreKey key = key(ns);
        putOk(store, key);
        MemorySegment sealed = InnerPages.read(store, key, PAGE, arena);
        assertEquals(PAGE + 60, sealed.byteSize(), "header (44 bytes) + page + tag (16)");
        assertArrayEquals("HCEP".getBytes(), sealed.asSlice(0, 4).toArray(ValueLayout.JAVA_BYTE), "the header's magic");
        assertEquals("a", InnerPages.keyId(store, key, PAGE));
        // Not the page: no run of 64 bytes of the clear page shows in what the inner store holds.
        MemorySegment clear = page(key, PAGE);
        MemorySegment body = sealed.asSlice(SealedPageDescriptor.HEADER_BYTES, PAGE);
        for (long at = 0; at < PAGE; at += 4096) {
            assertNotEquals(
                    -1, MemorySegment.mismatch(clear, at, at + 64, body, at, at + 64), "clear bytes at rest at " + at);
        }
        assertReads(store, key);
        StoreStats stats = store.stats();
        assertEquals(PAGE, stats.bytesRead(), "bytes read are page bytes, not sealed bytes");
        assertEquals(PAGE, stats.bytesWritten());
        assertEquals(PAGE + 60, store.inner().stats().bytesWritten());
    }

    @Test
    void theSameKeyPutTwiceIsSealedUnderAFreshNonceEachTime() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        StoreKey key = key(ns);
        putOk(store, key);
        MemorySegment first = InnerPages.read(store, key, PAGE, arena);
        await(store.inner().delete(List.of(key), deadline()));
        putOk(store, key);
        MemorySegment second = InnerPages.read(store, key, PAGE, arena);
        assertNotEquals(
                -1,
                MemorySegment.mismatch(
                        first,
                        SealedPageDescriptor.NONCE_OFFSET,
                        SealedPageDescriptor.HEADER_BYTES,
                        second,
                        SealedPageDescriptor.NONCE_OFFSET,
                        SealedPageDescriptor.HEADER_BYTES),
                "a nonce was used twice");
        assertReads(store, key);
    }

    @Test
    void aTamperedPageIsCorruptCountedAndRemoved() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        // A flipped byte in the ciphertext, in the tag, in the nonce, in the magic: each one fails, never bytes.
        long[] offsets = {
            SealedPageDescriptor.HEADER_BYTES + PAGE / 2,
            SealedPageDescriptor.HEADER_BYTES + PAGE + 3,
            SealedPageDescriptor.NONCE_OFFSET + 5,
            SealedPageDescriptor.KEY_CHECK_OFFSET + 1,
            0
        };
        long corruptBefore = store.stats().corruptPages();
        for (int n = 0; n < offsets.length; n++) {
            StoreKey key = key(ns);
            putOk(store, key);
            InnerPages.flipByte(store, key, PAGE, offsets[n]);
            MemorySegment target = sentinel(PAGE);
            BatchResult got = get(store, key, target);
            if (offsets[n] == SealedPageDescriptor.KEY_CHECK_OFFSET + 1) {
                // The key check is what tells another key from damage: a damaged one reads as another key's page.
                assertEquals(PageStatus.MISS, got.status(0), got::toString);
                assertTrue(PagePattern.isSentinel(target), "a miss left bytes in its target");
                assertEquals(1, store.cryptStats().wrongKeyPages());
                continue;
            }
            assertEquals(PageStatus.CORRUPT, got.status(0), "flip at " + offsets[n] + ": " + got);
            assertNotEquals(
                    -1, PagePattern.firstMismatch(target, key, 0), "the page's bytes were delivered all the same");
            assertEquals(0, hits(store, key), "a page that failed authentication is removed from the inner store");
            assertEquals(PageStatus.MISS, get(store, key, sentinel(PAGE)).status(0));
        }
        assertEquals(4, store.cryptStats().authenticationFailures());
        assertEquals(4, store.stats().corruptPages() - corruptBefore);
    }

    @Test
    void aPageUnderAnotherKeyOfTheSameIdIsAMissAndStaysForTheRightKey() throws Exception {
        Map<String, String> right = TestKeys.newKeys("a");
        Path keys = TestKeys.write(dir.resolve("keys"), right);
        EncryptedPageStore store = open(keys, "a");
        StoreKey key = key(ns);
        putOk(store, key);
        close(store);

        TestKeys.write(keys, TestKeys.newKeys("a")); // the same id, another key
        EncryptedPageStore wrong = open(keys, "a");
        MemorySegment target = sentinel(PAGE);
        BatchResult got = get(wrong, key, target);
        assertEquals(PageStatus.MISS, got.status(0), got::toString);
        assertTrue(got.detail(0).orElse("").contains("is not this store's key 'a'"), got::toString);
        assertTrue(PagePattern.isSentinel(target), "a miss left bytes in its target");
        assertEquals(1, wrong.cryptStats().wrongKeyPages());
        assertEquals(0, wrong.stats().corruptPages(), "another key's page is not damage");
        assertEquals(1, hits(wrong, key), "another key's page is left where it is");
        close(wrong);

        TestKeys.write(keys, right);
        assertReads(open(keys, "a"), key);
    }

    @Test
    void keysRotate() throws Exception {
        Map<String, String> keys = TestKeys.newKeys("A", "B");
        Path file = TestKeys.write(dir.resolve("keys"), Map.of("A", keys.get("A")));
        EncryptedPageStore store = open(file, "A");
        StoreKey old = key(ns);
        putOk(store, old);
        close(store);

        // B becomes the active key; A stays in the file: old pages read, new ones are sealed under B.
        TestKeys.write(file, keys);
        store = open(file, "B");
        assertReads(store, old);
        StoreKey fresh = key(ns);
        putOk(store, fresh);
        assertEquals("A", InnerPages.keyId(store, old, PAGE));
        assertEquals("B", InnerPages.keyId(store, fresh, PAGE));
        close(store);

        // A removed: its pages are misses, counted and removed (so that a fresh put of the key is not skipped as
        // stored); B's pages read on.
        TestKeys.write(file, Map.of("B", keys.get("B")));
        store = open(file, "B");
        List<String> dropped = new java.util.concurrent.CopyOnWriteArrayList<>();
        store.onDropped((namespaceId, hash) -> dropped.add(namespaceId + "/" + hash.toHex()));
        MemorySegment target = sentinel(PAGE);
        BatchResult got = get(store, old, target);
        assertEquals(PageStatus.MISS, got.status(0), got::toString);
        assertTrue(got.detail(0).orElse("").contains("key 'A'"), got::toString);
        assertTrue(PagePattern.isSentinel(target));
        assertEquals(1, store.cryptStats().unknownKeyPages());
        assertEquals(0, store.stats().corruptPages(), "a rotated-out key is not damage");
        assertEquals(0, hits(store, old), "a page under a key the store lacks is removed");
        assertEquals(List.of(old.toString()), dropped);
        assertReads(store, fresh);
        putOk(store, old);
        assertEquals("B", InnerPages.keyId(store, old, PAGE));
        assertReads(store, old);
    }

    @Test
    void aPageCopiedUnderAnotherKeyDoesNotOpen() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        StoreKey original = key(ns);
        putOk(store, original);
        // Another page of the same namespace, and the same page hash in another namespace (another tenant here).
        StoreKey otherHash = key(ns);
        StoreKey otherNamespace = ns.toBuilder().tenant("someone-else").build().key(original.hash());
        for (StoreKey copy : List.of(otherHash, otherNamespace)) {
            InnerPages.copy(store, original, copy, PAGE);
            MemorySegment target = sentinel(PAGE);
            BatchResult got = get(store, copy, target);
            assertEquals(PageStatus.CORRUPT, got.status(0), "copied to " + copy + ": " + got);
            assertEquals(0, hits(store, copy), "the copy was removed");
        }
        assertEquals(2, store.cryptStats().authenticationFailures());
        assertReads(store, original);
    }

    @Test
    void tenantsWithAKeyOfTheirOwnAreSealedUnderIt() throws Exception {
        Map<String, String> keys = TestKeys.newKeys("main", "acme-1");
        Path file = TestKeys.write(dir.resolve("keys"), keys, "tenant:acme acme-1");
        EncryptedPageStore store = open(file, "main");
        StoreKey acme = key(ns.toBuilder().tenant("acme").build());
        StoreKey other = key(ns.toBuilder().tenant("globex").build());
        StoreKey none = key(ns);
        for (StoreKey k : List.of(acme, other, none)) {
            putOk(store, k);
        }
        assertEquals("acme-1", InnerPages.keyId(store, acme, PAGE));
        assertEquals("main", InnerPages.keyId(store, other, PAGE));
        assertEquals("main", InnerPages.keyId(store, none, PAGE));
        close(store);

        // Crypto-shredding one tenant: without its key, its pages are misses; the others read on.
        TestKeys.write(file, Map.of("main", keys.get("main")));
        store = open(file, "main");
        assertEquals(PageStatus.MISS, get(store, acme, sentinel(PAGE)).status(0));
        assertReads(store, other);
        assertReads(store, none);
    }

    @Test
    void aTargetOfAnotherSizeIsASizeMismatchInPageBytes() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        StoreKey key = key(ns);
        putOk(store, key);
        for (int size : new int[] {PAGE / 2, PAGE + 60, PAGE * 2}) {
            MemorySegment target = sentinel(size);
            BatchResult got = get(store, key, target);
            assertEquals(PageStatus.SIZE_MISMATCH, got.status(0), size + ": " + got);
            assertTrue(got.detail(0).orElse("").contains("not " + size + " bytes"), got::toString);
            assertTrue(PagePattern.isSentinel(target), "a size mismatch wrote its target");
        }
        assertReads(store, key);
    }

    @Test
    void batchesMixHitsMissesAndFailuresPerPage() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        List<StoreKey> stored = new ArrayList<>();
        List<MemorySegment> pages = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            StoreKey k = key(ns);
            stored.add(k);
            pages.add(page(k, 4096 * (1 + i % 4)));
        }
        BatchResult put = store.put(PageBatch.of(stored, pages), deadline()).get(60, TimeUnit.SECONDS);
        assertTrue(put.allSucceeded(), put::toString);
        InnerPages.flipByte(store, stored.get(7), 4096 * 4, SealedPageDescriptor.HEADER_BYTES + 100);
        List<StoreKey> asked = new ArrayList<>(stored);
        asked.add(11, key(ns)); // never stored
        List<MemorySegment> targets = new ArrayList<>();
        for (int i = 0; i < asked.size(); i++) {
            int j = i < 11 ? i : i - 1;
            targets.add(sentinel(i == 11 ? 4096 : 4096 * (1 + j % 4)));
        }
        BatchResult got = store.get(PageBatch.of(asked, targets), deadline()).get(60, TimeUnit.SECONDS);
        for (int i = 0; i < asked.size(); i++) {
            PageStatus expected = i == 7 ? PageStatus.CORRUPT : i == 11 ? PageStatus.MISS : PageStatus.OK;
            assertEquals(expected, got.status(i), "page " + i + ": " + got);
            if (expected == PageStatus.OK) {
                assertEquals(-1, PagePattern.firstMismatch(targets.get(i), asked.get(i), 0), "page " + i);
            } else if (expected == PageStatus.MISS) {
                assertTrue(PagePattern.isSentinel(targets.get(i)));
            }
        }
    }

    @Test
    void aLargeBatchGoesInRunsAndKeepsEachPagesOutcome() throws Exception {
        // 48 pages of 512 KiB: 24 MiB, passed between the cipher and the file store in 6 runs of 4 MiB.
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        int size = 512 * 1024;
        List<StoreKey> stored = new ArrayList<>();
        List<MemorySegment> pages = new ArrayList<>();
        for (int i = 0; i < 48; i++) {
            StoreKey k = key(ns);
            stored.add(k);
            pages.add(page(k, size));
        }
        BatchResult put = store.put(PageBatch.of(stored, pages), deadline()).get(60, TimeUnit.SECONDS);
        assertTrue(put.allSucceeded(), put::toString);
        InnerPages.flipByte(store, stored.get(30), size, SealedPageDescriptor.HEADER_BYTES + 7);
        await(store.inner().delete(List.of(stored.get(17)), deadline()));
        List<MemorySegment> targets = new ArrayList<>();
        for (int i = 0; i < 48; i++) {
            targets.add(sentinel(size));
        }
        BatchResult got = store.get(PageBatch.of(stored, targets), deadline()).get(60, TimeUnit.SECONDS);
        for (int i = 0; i < 48; i++) {
            PageStatus expected = i == 30 ? PageStatus.CORRUPT : i == 17 ? PageStatus.MISS : PageStatus.OK;
            assertEquals(expected, got.status(i), "page " + i + ": " + got);
            if (expected == PageStatus.OK) {
                assertEquals(-1, PagePattern.firstMismatch(targets.get(i), stored.get(i), 0), "page " + i);
            }
        }
        assertTrue(PagePattern.isSentinel(targets.get(17)));
        assertEquals(46, store.stats().getHits());
    }

    @Test
    void pagesDroppedByEitherStoreAreToldToTheEncryptedStoresListener() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        Settings settings = Settings.builder()
                .flag("encrypted.inner", "file")
                .flag("file.root", dir.resolve("small").toString())
                .flag("file.capacity", "1MiB")
                .flag("encrypted.key-file", keys.toString())
                .build();
        EncryptedPageStore store = (EncryptedPageStore) PageStores.open(new StoreConfig("encrypted", settings));
        opened.add(store);
        List<String> dropped = new java.util.concurrent.CopyOnWriteArrayList<>();
        store.onDropped((namespaceId, hash) -> dropped.add(namespaceId + "/" + hash.toHex()));
        // A page found tampered: removed, and told.
        StoreKey tampered = key(ns);
        putOk(store, tampered);
        InnerPages.flipByte(store, tampered, PAGE, SealedPageDescriptor.HEADER_BYTES + 10);
        assertEquals(PageStatus.CORRUPT, get(store, tampered, sentinel(PAGE)).status(0));
        assertEquals(List.of(tampered.toString()), dropped, "the tampered page is told once");
        // The inner store evicting for its capacity (1 MiB, pages of 64 KiB): told through the encrypted store.
        for (int i = 0; i < 40; i++) {
            StoreKey k = key(ns);
            put(store, k, page(k, PAGE));
        }
        long until = System.nanoTime() + 10_000_000_000L;
        while (dropped.size() < 10 && System.nanoTime() < until) {
            Thread.sleep(20);
        }
        assertTrue(dropped.size() >= 10, "evictions of the inner store were not passed on: " + dropped);
        assertTrue(dropped.stream().allMatch(d -> d.startsWith(ns.id() + "/")), dropped::toString);
    }

    @Test
    void theStoreDeclaresTheInnerStoresCapabilitiesLessItsOverhead() throws Exception {
        Path keys = TestKeys.write(dir.resolve("keys"), TestKeys.newKeys("a"));
        EncryptedPageStore store = open(keys, "a");
        assertEquals("encrypted", store.name());
        assertTrue(store.location().contains("file store at"), store.location());
        assertEquals(
                store.inner().capabilities().features(), store.capabilities().features());
        assertEquals(
                Math.min(1L << 30, store.inner().capabilities().maxPageBytes() - 60),
                store.capabilities().maxPageBytes());
        assertEquals(
                store.inner().capabilities().preferredBatchKeys(),
                store.capabilities().preferredBatchKeys());
        store.close();
        assertTrue(
                assertThrowsClosed(() -> store.inner().leadingHits(List.of(key(ns)), deadline())),
                "closing the encrypted store closes the inner store");
    }

    private static boolean assertThrowsClosed(Runnable call) {
        try {
            call.run();
            return false;
        } catch (io.hicache.core.HiCacheException e) {
            return e.code() == io.hicache.core.ErrorCode.STORE_CLOSED;
        }
    }

    private static <T> T await(java.util.concurrent.CompletableFuture<T> call) throws Exception {
        return call.get(60, TimeUnit.SECONDS);
    }
}
