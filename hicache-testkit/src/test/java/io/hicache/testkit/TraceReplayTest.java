package io.hicache.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.cache.HiCache;
import io.hicache.core.cache.HiCacheConfig;
import io.hicache.core.cache.Retention;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.memory.InMemoryPageStore;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.function.Predicate;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Issue 40, part 3: the conversation trace through the cache itself, pages of one block (512 tokens), at 256Ki
 * tokens of device memory. The device tier alone is an LRU over the tree's leaves, close to the block-LRU oracle;
 * with a host tier and an L3 the cache keeps more, and never more than the trace can give (every block ever seen).
 */
class TraceReplayTest {
    private static final KvGeometry TINY = KvGeometry.mla(1, 8, 0, KvDtype.FP8_E4M3); // 8 bytes a token
    private static final Namespace NS = Namespace.of("trace", KvDtype.FP8_E4M3, PageByteOrder.LAYER_MAJOR, 0, 1);
    private static final int DEVICE_PAGES = (256 << 10) / Trace.BLOCK_TOKENS;

    private static double replay(Trace trace, Settings settings, boolean store) throws Exception {
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 1)) {
            var b = HiCache.builder()
                    .config(HiCacheConfig.from(settings))
                    .namespace(NS)
                    .geometry(TINY)
                    .devicePages(DEVICE_PAGES)
                    .runtime(runtime);
            if (store) {
                b.store(new InMemoryPageStore(1L << 30));
            }
            try (HiCache cache = b.open()) {
                return new TraceReplay().run(cache, trace).hitRate();
            }
        }
    }

    @Test
    void theCacheNeverExceedsTheTracesCeilingAndItsDeviceTierTracksTheOracle() throws Exception {
        Trace trace = Trace.mooncakeConversation();
        BlockLru oracle = new BlockLru(DEVICE_PAGES);
        BlockLru ceiling = new BlockLru(Long.MAX_VALUE);
        for (Trace.Request r : trace.requests()) {
            oracle.serve(r.blocks());
            ceiling.serve(r.blocks());
        }
        double device = replay(
                trace,
                Settings.builder()
                        .flag("page-size", "512")
                        .flag("hicache-tiers", "device-only")
                        .build(),
                false);
        // the tree evicts leaves least recently used; a request's own blocks are never evicted under it
        assertEquals(oracle.hitRate(), device, 0.01, "device only against block LRU at 256Ki tokens");
        Path host = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-trace-");
        try {
            double tiers = replay(
                    trace,
                    Settings.builder()
                            .flag("page-size", "512")
                            .flag("hicache-ratio", "4")
                            .flag("host.dir", host.toString())
                            .flag("hicache-storage-prefetch-policy", "wait_complete")
                            .flag("prefetch-threshold", "512")
                            .build(),
                    true);
            assertTrue(tiers > device, "three tiers keep more: " + tiers + " against " + device);
            assertTrue(tiers <= ceiling.hitRate() + 1e-9, "never more than the trace gives: " + tiers);
        } finally {
            try (Stream<Path> all = Files.walk(host)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    /**
     * Issue 42: a tagged conversation comes back after a minute of others filling the device; made with a priority
     * held 10 minutes of the trace's time, it is found whole, and without one it was evicted. The replay counts the
     * tagged requests apart from the rest.
     */
    @Test
    void aTaggedConversationIsKeptByItsRetentionOnTheTracesClock() throws Exception {
        StringBuilder lines = new StringBuilder(request(0, 0, 10, 11));
        for (int i = 0; i < 8; i++) {
            lines.append(request(1_000 + i, 0, 100 + 10 * i + 1, 100 + 10 * i + 2));
        }
        lines.append(request(60_000, 0, 10, 11, 12)); // the tagged conversation's next turn
        Trace trace = Trace.read(new ByteArrayInputStream(lines.toString().getBytes(StandardCharsets.UTF_8)));
        Predicate<Trace.Request> tagged = r -> r.blocks()[1] == 10;
        TraceReplay with =
                replayDeviceOnly(trace, new TraceReplay().tag(tagged, Retention.of(50, Duration.ofMinutes(10))));
        TraceReplay without = replayDeviceOnly(trace, new TraceReplay().tag(tagged, Retention.NONE));
        assertEquals(7, with.taggedLookedUp(), "3 blocks, then 4");
        assertEquals(3 / 7.0, with.taggedHitRate(), 1e-9, "the second turn found its first 3 blocks");
        assertEquals(1 / 7.0, without.taggedHitRate(), 1e-9, "without a priority only the shared block 0 was left");
        assertEquals(without.lookedUp(), with.lookedUp());
        assertEquals(with.hits(), Math.round(with.taggedHitRate() * 7 + with.untaggedHitRate() * 24));
    }

    private static String request(long timestamp, int... blocks) {
        return "{\"timestamp\": " + timestamp + ", \"input_length\": " + blocks.length * Trace.BLOCK_TOKENS
                + ", \"output_length\": 1, \"hash_ids\": " + Arrays.toString(blocks) + "}\n";
    }

    /** {@code trace} through a device of 8 pages of one block each, on the replay's clock. */
    private static TraceReplay replayDeviceOnly(Trace trace, TraceReplay replay) throws Exception {
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(64L << 20, 1);
                HiCache cache = HiCache.builder()
                        .config(HiCacheConfig.from(Settings.builder()
                                .flag("page-size", "512")
                                .flag("hicache-tiers", "device-only")
                                .build()))
                        .namespace(NS)
                        .geometry(TINY)
                        .devicePages(8)
                        .runtime(runtime)
                        .clock(replay.clock())
                        .open()) {
            return replay.run(cache, trace);
        }
    }
}
