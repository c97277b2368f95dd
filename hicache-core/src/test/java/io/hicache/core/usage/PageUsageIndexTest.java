package io.hicache.core.usage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.usage.PageUsageIndex.Candidates;
import io.hicache.core.usage.PageUsageIndex.Claimed;
import io.hicache.core.usage.PageUsageIndex.Order;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The index's rules, case by case; {@link PageUsageIndexModelTest} checks them at random against a model. */
class PageUsageIndexTest {

    private static PageUsageIndex<String> recency() {
        return PageUsageIndex.<String>builder(Order.RECENCY)
                .namespaces(k -> k.substring(0, 1))
                .build();
    }

    private static List<String> keysOf(List<Claimed<String>> claimed) {
        return claimed.stream().map(Claimed::key).toList();
    }

    @Test
    void recencyOrderTakesTheLeastRecentlyUsedFirst() {
        PageUsageIndex<String> index = recency();
        for (String k : List.of("a1", "a2", "a3", "a4")) {
            index.insert(k, 10);
        }
        assertTrue(index.touch("a2"));
        assertTrue(index.touchEntry(index.entry("a1")));
        assertFalse(index.touch("zz"), "a key not in the index was touched");
        assertEquals(List.of("a3", "a4", "a2", "a1"), index.keys(k -> true));
        assertEquals(List.of("a3", "a4"), keysOf(index.claimOldest(20)));
        index.checkInvariants();
    }

    @Test
    void insertionOrderIgnoresTouches() {
        PageUsageIndex<String> index =
                PageUsageIndex.<String>builder(Order.INSERTION).build();
        for (String k : List.of("k1", "k2", "k3")) {
            index.insert(k, 10);
        }
        assertTrue(index.touch("k1"), "touching a present key says it is present");
        assertEquals(List.of("k1", "k2", "k3"), index.keys(k -> true));
        assertEquals(List.of("k1"), keysOf(index.claimOldest(1)));
        assertFalse(index.tracksNamespaces());
        assertThrows(IllegalStateException.class, () -> index.bytes("k"));
        assertThrows(
                IllegalStateException.class,
                () -> index.claimOldest(1, Candidates.any().inNamespace("k")));
    }

    @Test
    void aKeyIsStoredOnceAndItsBytesCount() {
        PageUsageIndex<String> index = recency();
        long e = index.insert("a1", 100);
        assertNotEquals(PageUsageIndex.NO_ENTRY, e);
        assertEquals(PageUsageIndex.NO_ENTRY, index.insert("a1", 999), "a second insert of a key replaced it");
        assertEquals(100, index.bytesOf(e));
        assertEquals("a1", index.keyOf(e));
        assertEquals(1, index.size());
        assertEquals(100, index.bytes());
        assertEquals(100, index.remove("a1"));
        assertEquals(-1, index.remove("a1"));
        assertEquals(0, index.bytes());
        assertEquals(0, index.size());
        index.checkInvariants();
    }

    @Test
    void pinnedEntriesAreNeverCandidates() {
        PageUsageIndex<String> index = recency();
        long a = index.insert("a1", 10);
        index.insert("a2", 10);
        assertEquals(a, index.pin("a1"));
        assertTrue(index.pinEntry(a), "pins are a count");
        assertEquals(List.of("a2"), keysOf(index.claimOldest(100)), "a pinned entry was claimed");
        assertTrue(index.unpin(a));
        assertEquals(List.of(), keysOf(index.claimOldest(100)), "an entry still pinned once was claimed");
        assertTrue(index.unpin(a));
        assertThrows(IllegalStateException.class, () -> index.unpin(a), "unpinned more often than pinned");
        assertEquals(List.of("a1"), keysOf(index.claimOldest(100)));
        assertEquals(PageUsageIndex.NO_ENTRY, index.pin("nope"));
    }

    @Test
    void claimedEntriesAreSkippedAndCannotBePinned() {
        PageUsageIndex<String> index = recency();
        long a = index.insert("a1", 10);
        long b = index.insert("a2", 10, PageUsageIndex.CLAIMED);
        assertTrue(index.claimEntry(a));
        assertFalse(index.claimEntry(a), "claimed twice");
        assertEquals(PageUsageIndex.NO_ENTRY, index.pin("a1"), "an entry being evicted was pinned");
        assertFalse(index.pinEntry(b), "an entry being written was pinned");
        assertEquals(List.of(), index.claimOldest(100), "a claimed entry was claimed again");
        assertEquals(20, index.bytes(), "claimed entries still count until removed");
        assertTrue(index.unclaim(b));
        assertFalse(index.unclaim(b));
        assertEquals(List.of("a2"), keysOf(index.claimOldest(100)));
        assertTrue(index.unclaim(a));
        assertTrue(index.pinEntry(a));
        assertFalse(index.claimEntry(a), "a pinned entry was claimed");
        assertThrows(
                IllegalArgumentException.class,
                () -> index.insert("a9", 1, PageUsageIndex.CLAIMED | PageUsageIndex.PINNED));
        assertThrows(IllegalArgumentException.class, () -> index.insert("a9", 1, 4));
    }

    @Test
    void anEntryNumberNamesOneEntryEvenWhenItsKeyComesBack() {
        PageUsageIndex<String> index = recency();
        long first = index.insert("a1", 10);
        assertEquals(first, index.pin("a1"));
        assertEquals(10, index.remove("a1"), "a pinned entry can be removed (a delete)");
        long second = index.insert("a1", 20);
        assertNotEquals(first, second);
        assertFalse(index.unpin(first), "a late unpin of the removed entry reached the new one");
        assertFalse(index.touchEntry(first));
        assertEquals(-1, index.removeEntry(first), "a stale number removed the new entry");
        assertNull(index.keyOf(first));
        assertEquals(-1, index.bytesOf(first));
        assertFalse(index.unpin(PageUsageIndex.NO_ENTRY));
        assertEquals(List.of("a1"), keysOf(index.claimOldest(1)), "the new entry was left pinned");
        assertEquals(20, index.removeEntry(second));
        index.checkInvariants();
    }

    @Test
    void bytesAndEntriesAreCountedPerNamespace() {
        PageUsageIndex<String> index = recency();
        index.insert("a1", 1);
        index.insert("b1", 10);
        index.insert("a2", 2);
        index.insert("b2", 20);
        assertEquals(3, index.bytes("a"));
        assertEquals(30, index.bytes("b"));
        assertEquals(2, index.size("b"));
        assertEquals(0, index.bytes("c"));
        assertEquals(0, index.size("c"));
        index.remove("b1");
        assertEquals(20, index.bytes("b"));
        assertEquals(23, index.bytes());
        index.touch("a1");
        assertEquals(
                List.of("a2", "a1"),
                keysOf(index.claimOldest(100, Candidates.any().inNamespace("a"))));
        assertEquals(List.of(), index.claimOldest(100, Candidates.any().inNamespace("c")));
        index.checkInvariants();
    }

    /**
     * A namespace that empties gives its number back: 100,000 namespaces that come and go (a fresh cache salt per
     * request) leave the index with nothing for them; it used to keep a few bytes for each, for good.
     */
    @Test
    void aNamespaceThatEmptiesLeavesNothingBehind() {
        PageUsageIndex<String> index = PageUsageIndex.<String>builder(Order.RECENCY)
                .namespaces(k -> k.substring(0, k.indexOf('/')))
                .build();
        index.insert("kept/1", 1);
        for (int i = 0; i < 100_000; i++) {
            index.insert("ns" + i + "/a", 5);
            index.insert("ns" + i + "/b", 6);
            index.remove("ns" + i + "/a");
            index.remove("ns" + i + "/b");
            assertEquals(0, index.size("ns" + i));
        }
        assertTrue(index.namespaceNumbers() <= 2, index.namespaceNumbers() + " namespace numbers for 2 at a time");
        assertEquals(1, index.size("kept"));
        index.insert("kept/2", 1);
        assertEquals(
                List.of("kept/1", "kept/2"),
                keysOf(index.claimOldest(100, Candidates.any().inNamespace("kept"))));
        index.checkInvariants();
    }

    @Test
    void candidatesCanBeLimitedToFlaggedEntriesAndByAFilter() {
        PageUsageIndex<String> index = recency();
        long a1 = index.insert("a1", 10);
        index.insert("a2", 10, PageUsageIndex.FLAGGED);
        index.insert("b3", 10, PageUsageIndex.FLAGGED);
        index.insert("a4", 10, PageUsageIndex.FLAGGED);
        assertEquals(
                List.of("a2"),
                keysOf(index.claimOldest(10, Candidates.any().onlyFlagged())),
                "an entry L3 does not have yet was offered");
        assertTrue(index.setFlagged(a1, true));
        assertEquals(
                List.of("a1", "a4"),
                keysOf(index.claimOldest(
                        100, Candidates.<String>any().onlyFlagged().matching(k -> k.startsWith("a")))));
        assertTrue(index.setFlagged(a1, false));
        assertFalse(index.setFlagged(-1, true));
    }

    @Test
    void claimingStopsOnceTheBytesAreReached() {
        PageUsageIndex<String> index = recency();
        for (int i = 0; i < 10; i++) {
            index.insert("a" + i, 100);
        }
        assertEquals(List.of("a0", "a1", "a2"), keysOf(index.claimOldest(201)));
        assertEquals(List.of("a3"), keysOf(index.claimOldest(1)));
        assertEquals(List.of(), index.claimOldest(0));
        assertEquals(1000, index.bytes());
    }

    @Test
    void removingDuringAWalkKeepsTheRestInOrder() {
        PageUsageIndex<String> index = recency();
        for (int i = 0; i < 100; i++) {
            index.insert("a" + i, 1);
        }
        // Walk the claimed candidates while removing them and others not yet reached, and touching some.
        List<String> removed = new ArrayList<>();
        for (Claimed<String> c : index.claimOldest(50)) {
            assertEquals(1, index.removeEntry(c.entry()));
            removed.add(c.key());
            int i = Integer.parseInt(c.key().substring(1));
            if (i % 10 == 0) {
                index.remove("a" + (i + 55)); // not yet claimed
                index.touch("a" + (i + 51)); // moves to the end
            }
        }
        index.checkInvariants();
        assertEquals(50, removed.size());
        List<String> rest = index.keys(k -> true);
        assertEquals(45, rest.size());
        assertEquals("a50", rest.getFirst());
        assertEquals(List.of("a51", "a61", "a71", "a81", "a91"), rest.subList(40, 45));
        // Keys handed out by keys() are a snapshot: removing them all as we go is fine.
        for (String k : index.keys(k -> true)) {
            assertTrue(index.remove(k) > 0);
        }
        assertEquals(0, index.size());
        index.checkInvariants();
    }

    @Test
    void slotsAreReusedAndTheTableGrows() {
        PageUsageIndex<Integer> index =
                PageUsageIndex.<Integer>builder(Order.RECENCY).build();
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 50_000; i++) {
                assertNotEquals(PageUsageIndex.NO_ENTRY, index.insert(i, 1));
            }
            for (int i = 0; i < 50_000; i += 2) {
                assertEquals(1, index.remove(i));
            }
            index.checkInvariants();
            for (int i = 0; i < 50_000; i++) {
                assertEquals(i % 2 == 1, index.contains(i));
                index.remove(i);
            }
        }
        assertTrue(index.capacities()[0] < 100_000, "freed slots were not reused: " + index.capacities()[0]);
        index.checkInvariants();
    }

    @Test
    void anIndexSizedUpFrontDoesNotGrowAndEntryBytesAreChecked() {
        PageUsageIndex<Integer> index = PageUsageIndex.<Integer>builder(Order.INSERTION)
                .expectedEntries(1_000)
                .build();
        long[] before = index.capacities();
        for (int i = 0; i < 1_000; i++) {
            index.insert(i, 0xFFFF_FFFFL);
        }
        assertEquals(before[0], index.capacities()[0], "the slots grew");
        assertEquals(before[1], index.capacities()[1], "the table grew");
        assertEquals(1_000 * 0xFFFF_FFFFL, index.bytes(), "bytes are kept as unsigned 32-bit values");
        assertThrows(IllegalArgumentException.class, () -> index.insert(-1, 1L << 32));
        assertThrows(IllegalArgumentException.class, () -> index.insert(-1, -1));
        assertThrows(
                IllegalArgumentException.class,
                () -> PageUsageIndex.<Integer>builder(Order.INSERTION)
                        .expectedEntries(Integer.MAX_VALUE)
                        .build());
        index.checkInvariants();
    }

    @Test
    void manyThreadsKeepTheTotalsRight() throws Exception {
        PageUsageIndex<Integer> index = PageUsageIndex.<Integer>builder(Order.RECENCY)
                .namespaces(k -> "n" + k % 3)
                .build();
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    ThreadLocalRandom r = ThreadLocalRandom.current();
                    for (int i = 0; i < 50_000; i++) {
                        int k = r.nextInt(2_000);
                        switch (r.nextInt(5)) {
                            case 0 -> index.insert(k, 1 + k % 7);
                            case 1 -> index.remove(k);
                            case 2 -> index.touch(k);
                            case 3 -> {
                                long e = index.pin(k);
                                index.touchEntry(e);
                                index.unpin(e);
                            }
                            default -> {
                                for (Claimed<Integer> c : index.claimOldest(20)) {
                                    if (r.nextBoolean()) {
                                        index.removeEntry(c.entry());
                                    } else {
                                        index.unclaim(c.entry());
                                    }
                                }
                            }
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        start.countDown();
        for (Thread w : workers) {
            w.join();
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        index.checkInvariants();
        long bytes = 0;
        for (int k : index.keys(k -> true)) {
            bytes += 1 + k % 7;
        }
        assertEquals(bytes, index.bytes());
        assertEquals(index.bytes(), index.bytes("n0") + index.bytes("n1") + index.bytes("n2"));
        assertEquals(index.size(), index.claimOldest(Long.MAX_VALUE).size(), "a pin or claim was left behind");
    }
}
