package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.HiCacheTest.unclosable;
import static io.hicache.core.cache.TestEngine.concat;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEvent;
import io.hicache.core.events.KvEventBatch;
import io.hicache.core.events.KvEventCollector;
import io.hicache.core.events.KvEventPublisher;
import io.hicache.core.events.Medium;
import io.hicache.core.key.PageHasher;
import io.hicache.core.key.PageHashes;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The KV events a real cache (emulated device) publishes, checked as a router would read them: block ids computed
 * here from the tokens, parents, token ids, media, and a router's view built from the events against what the cache
 * then says it holds.
 */
class HiCacheKvEventsTest {
    private static final int PAGE = 4;
    private static final PageHasher HASHER = new PageHasher(PAGE);

    /** A router's view: which media hold each block, from the events alone. */
    static final class RouterView {
        final Map<Long, Set<Medium>> where = new HashMap<>();

        void apply(List<KvEvent> events) {
            for (KvEvent e : events) {
                switch (e) {
                    case BlockStored s ->
                        Arrays.stream(s.blockHashes())
                                .forEach(id -> where.computeIfAbsent(id, k -> EnumSet.noneOf(Medium.class))
                                        .add(s.medium()));
                    case BlockRemoved r ->
                        Arrays.stream(r.blockHashes()).forEach(id -> {
                            Set<Medium> m = where.get(id);
                            assertTrue(
                                    m != null && m.remove(r.medium()),
                                    "removed from " + r.medium() + " but never stored" + " there: " + id);
                        });
                    case AllBlocksCleared c -> where.clear();
                }
            }
        }

        /** Leading pages of {@code ids} the view has in {@code medium}. */
        int leading(long[] ids, Medium medium) {
            int n = 0;
            while (n < ids.length && where.getOrDefault(ids[n], Set.of()).contains(medium)) {
                n++;
            }
            return n;
        }
    }

    /** SGLang's block ids of a prompt's pages, from the hex keys (hash_str_to_int64), independent of BlockIds. */
    static long[] sglangIds(int[] tokens) {
        PageHashes h = HASHER.hashPages(tokens);
        long[] ids = new long[h.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = Long.parseUnsignedLong(h.get(i).toHex().substring(0, 16), 16);
        }
        return ids;
    }

    private static List<KvEvent> drain(TestEngine e, KvEventCollector c) throws InterruptedException {
        e.quiesce();
        assertTrue(e.cache.awaitIdle(Duration.ofSeconds(30)), "events handed over");
        List<KvEvent> out = new ArrayList<>();
        for (KvEventBatch b : c.drain()) {
            out.addAll(b.events());
        }
        return out;
    }

    private static List<BlockStored> stored(List<KvEvent> events, Medium medium) {
        return events.stream()
                .filter(e -> e instanceof BlockStored s && s.medium() == medium)
                .map(e -> (BlockStored) e)
                .toList();
    }

    @Test
    void insertsBackupsEvictionsAndLoadBacksAreAnnouncedAsSglangWould() throws Exception {
        KvEventCollector collector = new KvEventCollector();
        RouterView router = new RouterView();
        try (TestEngine e = new TestEngine(settings(), 16, null, collector)) {
            int[] a = prompt(0, 32);
            e.serve("a", a);
            List<KvEvent> first = drain(e, collector);
            router.apply(first);
            long[] aIds = sglangIds(a);
            BlockStored expected =
                    new BlockStored(aIds, OptionalLong.empty(), a, PAGE, OptionalInt.empty(), Medium.GPU);
            assertEquals(List.of(expected), stored(first, Medium.GPU), "one run on the device, from the root");
            assertEquals(
                    List.of(new BlockStored(aIds, OptionalLong.empty(), a, PAGE, OptionalInt.empty(), Medium.CPU)),
                    stored(first, Medium.CPU),
                    "write-through backed it up");

            int[] b = concat(a, prompt(500, 8)); // extends a by two pages
            e.serve("b", b);
            List<KvEvent> second = drain(e, collector);
            router.apply(second);
            long[] bIds = sglangIds(b);
            BlockStored tail = stored(second, Medium.GPU).getFirst();
            assertArrayEquals(Arrays.copyOfRange(bIds, 8, 10), tail.blockHashes());
            assertEquals(OptionalLong.of(aIds[7]), tail.parentBlockHash(), "chained from a's last page");
            assertArrayEquals(prompt(500, 8), tail.tokenIds());

            int[] c = prompt(100_000, 64); // all 16 device pages: a and b's tail leave the device (kept on the host)
            e.serve("c", c);
            List<KvEvent> third = drain(e, collector);
            router.apply(third);
            Set<Long> removedFromGpu = third.stream()
                    .filter(ev -> ev instanceof BlockRemoved r && r.medium() == Medium.GPU)
                    .flatMap(ev ->
                            Arrays.stream(((BlockRemoved) ev).blockHashes()).boxed())
                    .collect(Collectors.toSet());
            assertEquals(Arrays.stream(bIds).boxed().collect(Collectors.toSet()), removedFromGpu);
            assertEquals(0, router.leading(bIds, Medium.GPU));
            assertEquals(10, router.leading(bIds, Medium.CPU));

            e.serve("a again", a); // loaded back from the host
            router.apply(drain(e, collector));
            try (CacheRequest r = e.cache.request("look", b)) {
                assertEquals(
                        r.deviceTokens() / PAGE, router.leading(bIds, Medium.GPU), "the router's view is the cache's");
                assertEquals(8, router.leading(bIds, Medium.GPU));
            }
            e.cache.core().checkConsistency();
            assertEquals(0, e.cache.kvEventStats().droppedEvents());
        }
    }

    @Test
    void uploadsAndPrefetchesAnnounceTheirRunsWithTokensAndParents() throws Exception {
        InMemoryPageStore shared = new InMemoryPageStore(1L << 30);
        int[] p = prompt(777, 64);
        long[] ids = sglangIds(p);
        try (KvEventCollector firstEvents = new KvEventCollector();
                TestEngine first = new TestEngine(settings(), 64, unclosable(shared), firstEvents)) {
            first.serve("a", p);
            List<BlockStored> uploaded = stored(drain(first, firstEvents), Medium.DISK);
            assertFalse(uploaded.isEmpty(), "a store that is not shared is DISK");
            List<Long> all = new ArrayList<>();
            for (BlockStored s : uploaded) {
                int from = all.size();
                assertEquals(from == 0 ? OptionalLong.empty() : OptionalLong.of(ids[from - 1]), s.parentBlockHash());
                assertArrayEquals(Arrays.copyOfRange(p, from * PAGE, (from + s.blockCount()) * PAGE), s.tokenIds());
                Arrays.stream(s.blockHashes()).forEach(all::add);
            }
            assertEquals(Arrays.stream(ids).boxed().toList(), all, "every page, once, in order");
        }
        try (KvEventCollector secondEvents = new KvEventCollector();
                TestEngine second = new TestEngine(
                        settings("hicache-storage-prefetch-policy", "wait_complete"),
                        64,
                        unclosable(shared),
                        secondEvents)) {
            second.serve("b", p);
            List<KvEvent> events = drain(second, secondEvents);
            List<BlockStored> fetched = stored(events, Medium.CPU);
            assertEquals(
                    List.of(new BlockStored(ids, OptionalLong.empty(), p, PAGE, OptionalInt.empty(), Medium.CPU)),
                    fetched,
                    "the prefetch landed the whole prompt on the host");
            assertEquals(
                    List.of(new BlockStored(ids, OptionalLong.empty(), p, PAGE, OptionalInt.empty(), Medium.GPU)),
                    stored(events, Medium.GPU),
                    "then loaded it back");
            assertTrue(stored(events, Medium.DISK).isEmpty(), "the store had every page: nothing uploaded");
        } finally {
            shared.close();
        }
    }

    @Test
    void eventsAreOffByDefault() throws Exception {
        try (TestEngine e = new TestEngine(settings(), 16, null)) {
            e.serve("a", prompt(0, 32));
            e.quiesce();
            assertFalse(e.cache.core().events.enabled());
            assertEquals(0, e.cache.kvEventStats().publishedEvents());
        }
    }

    @Test
    void aSubscriberThatNeverReadsNeverBlocksTheCache() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        KvEventPublisher stuck = new KvEventPublisher() {
            @Override
            public void publish(KvEventBatch batch) {
                try {
                    release.await();
                } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                }
            }

            @Override
            public void close() {}
        };
        try (TestEngine e = new TestEngine(settings("kv-events-config", "{\"max_queue_size\": 8}"), 16, null, stuck)) {
            long start = System.nanoTime();
            for (int i = 0; i < 20; i++) {
                e.serve("r" + i, prompt(i * 10_000, 32));
            }
            e.quiesceCopies();
            assertTrue(System.nanoTime() - start < Duration.ofSeconds(20).toNanos());
            assertTrue(e.cache.kvEventStats().droppedEvents() > 0, e.cache.kvEventStats()::toString);
            assertTrue(e.cache.kvEventStats().queuedEvents() <= 8);
            e.cache.core().checkConsistency();
            release.countDown(); // before closing, which would otherwise wait for the stuck publish
        } finally {
            release.countDown();
        }
    }
}
