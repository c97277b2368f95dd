package io.hicache.server.daemon;

import static io.hicache.server.daemon.Pages.deadline;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.config.Settings;
import io.hicache.core.events.AllBlocksCleared;
import io.hicache.core.events.BlockRemoved;
import io.hicache.core.events.BlockStored;
import io.hicache.core.events.KvEvent;
import io.hicache.core.events.KvEventCollector;
import io.hicache.core.events.Medium;
import io.hicache.core.events.Placement;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.storage.remote.RemotePageStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The daemon's KV events over its real protocol: pages put are stored in the slab (CPU_PINNED), then in L3 once
 * written behind (the file store is not shared: DISK); deletes and evictions remove them; a clear clears all. The
 * daemon knows pages, not tokens: one page per BlockStored, no parent, no token ids, block size 0.
 */
class DaemonKvEventsTest {
    private static final int PAGE_BYTES = 64 * 1024;

    /** SGLang's block id of a key: the first 16 hex digits of its page hash, as a signed int64. */
    private static long id(StoreKey key) {
        return Long.parseUnsignedLong(
                HexFormat.of().formatHex(key.hash().toBytes()).substring(0, 16), 16);
    }

    /** The event of {@code key}'s page stored in {@code medium}, with the daemon's placement (docs/kv-events.md). */
    private static BlockStored storedPage(StoreKey key, Medium medium) {
        Placement placement = medium == Medium.CPU
                ? new Placement("slab", "", key.namespace().id())
                : new Placement("l3", "file", key.namespace().id());
        return new BlockStored(
                new long[] {id(key)}, OptionalLong.empty(), new int[0], 0, OptionalInt.empty(), medium, placement);
    }

    /** Waits until the collector got {@code count} events; returns them. */
    private static List<KvEvent> await(KvEventCollector collector, List<KvEvent> seen, int count) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (seen.size() < count && System.nanoTime() < end) {
            seen.addAll(collector.drainEvents());
            Thread.sleep(5);
        }
        assertTrue(seen.size() >= count, "only " + seen.size() + " of " + count + " events: " + seen);
        return seen;
    }

    private static Set<Long> removed(List<KvEvent> events, Medium medium) {
        Set<Long> out = new TreeSet<>();
        for (KvEvent e : events) {
            if (e instanceof BlockRemoved r && r.medium() == medium) {
                Arrays.stream(r.blockHashes()).forEach(out::add);
            }
        }
        return out;
    }

    @Test
    void storesWritesBehindDeletesEvictionsAndClearsAreAnnounced() throws Exception {
        KvEventCollector collector = new KvEventCollector();
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-test-slab-");
        Path fileRoot = Files.createTempDirectory("hicache-test-l3-");
        try (TestDaemon daemon = TestDaemon.start(
                        Map.of(
                                "server.max-page-bytes",
                                "64KiB",
                                "server.max-frame-bytes",
                                "4MiB",
                                "server.host-size",
                                "1MiB"),
                        hostDir,
                        fileRoot,
                        collector);
                RemotePageStore client = daemon.client();
                Pages pages = new Pages()) {
            Namespace ns = Pages.namespace("events");
            List<StoreKey> first = pages.keys(ns, 3);
            Pages.put(client, pages.filled(first, PAGE_BYTES));
            List<KvEvent> seen = await(collector, new ArrayList<>(), 6); // each page in the slab, then in L3
            for (StoreKey k : first) {
                assertTrue(seen.contains(storedPage(k, Medium.CPU)), "in the slab: " + seen);
                assertTrue(
                        seen.indexOf(storedPage(k, Medium.DISK)) > seen.indexOf(storedPage(k, Medium.CPU)),
                        "then written behind to the file store: " + seen);
            }

            client.delete(first.subList(0, 1), deadline()).get(30, TimeUnit.SECONDS);
            List<KvEvent> deleted = await(collector, new ArrayList<>(), 2);
            assertEquals(Set.of(id(first.get(0))), removed(deleted, Medium.CPU));
            assertEquals(Set.of(id(first.get(0))), removed(deleted, Medium.DISK));

            // 1 MiB of slab holds 16 pages: 40 more evict the oldest, which L3 has by then.
            List<StoreKey> more = pages.keys(ns, 40);
            for (int i = 0; i < more.size(); i += 4) {
                Pages.put(client, pages.filled(more.subList(i, i + 4), PAGE_BYTES));
            }
            List<KvEvent> churn = await(collector, new ArrayList<>(), 80);
            // The puts have returned, so every eviction has happened; their events may still be on their way (reading
            // until the first one came let a CI run stop at 23 of 26).
            long evictions = daemon.server.cache.counters.evictedPages.sum();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (removed(churn, Medium.CPU).size() < Math.max(1, evictions) && System.nanoTime() < end) {
                churn.addAll(collector.drainEvents());
                Thread.sleep(5);
            }
            Set<Long> evicted = removed(churn, Medium.CPU);
            assertTrue(evicted.size() >= 40 + 2 - 16, "at least what did not fit was evicted: " + evicted.size());
            assertEquals(
                    evicted.size(), daemon.server.cache.counters.evictedPages.sum(), "one removal per page evicted");
            assertTrue(removed(churn, Medium.DISK).isEmpty(), "eviction leaves L3 alone");

            client.clearAll(deadline()).get(30, TimeUnit.SECONDS);
            // Pages of the churn may still be announced as written behind before the clear (the loop above waited
            // for the evictions, not for every write): read until the clear shows up, then a little longer.
            List<KvEvent> cleared = new ArrayList<>();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!cleared.contains(new AllBlocksCleared()) && System.nanoTime() < until) {
                cleared.addAll(collector.drainEvents());
                Thread.sleep(5);
            }
            Thread.sleep(200);
            cleared.addAll(collector.drainEvents());
            assertEquals(new AllBlocksCleared(), cleared.getLast(), "nothing is announced after the clear: " + cleared);
        }
    }

    private static ServerConfig withEvents(String bind, String json) {
        Settings.Builder b = Settings.builder().flag("server.bind", bind).flag("server.kv-events-config", json);
        if (!bind.startsWith("127.")) {
            b.flag("server.auth-token", "t0ken");
        }
        return ServerConfig.from(b.build());
    }

    @Test
    void aLoopbackDaemonKeepsItsEventsOnLoopback() {
        String wildcard = "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\"}";
        assertEquals(
                Optional.of("127.0.0.1"),
                withEvents("127.0.0.1", wildcard).kvEventsPublished().bindHost(),
                "the daemon serves loopback only: so do its events");
        assertEquals(
                Optional.of("10.1.2.3"),
                withEvents(
                                "127.0.0.1",
                                "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\", "
                                        + "\"bind_host\": \"10.1.2.3\"}")
                        .kvEventsPublished()
                        .bindHost(),
                "a bind_host given is kept");
        assertEquals(
                Optional.empty(),
                withEvents("0.0.0.0", wildcard).kvEventsPublished().bindHost(),
                "a daemon serving every interface publishes as SGLang does");
        assertEquals(
                Optional.empty(),
                withEvents("127.0.0.1", "{\"publisher\": \"null\"}")
                        .kvEventsPublished()
                        .bindHost());
    }
}
