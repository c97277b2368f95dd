package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.config.Settings;
import io.hicache.core.events.KvEventSink;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** How much a full slab's eviction frees: what the put needs and up to a bounded low-water mark, not 1/64 of it. */
class SlabCacheEvictionTest {
    private static final int PAGE_BYTES = 1 << 20;
    private static final long SLAB_BYTES = 512L << 20; // 1/64 is 8 MiB, above the cap

    @Test
    void evictionOfAFullSlabFreesNoMoreThanTheCappedTarget() throws Exception {
        Path dir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-test-evict-");
        Settings settings = Settings.builder()
                .flag("server.port", "0")
                .flag("server.metrics-port", "-1")
                .flag("server.store", "none")
                .flag("server.host-dir", dir.toString())
                .flag("server.host-size", SLAB_BYTES + "B")
                .build();
        ByteBuf page = Unpooled.directBuffer(PAGE_BYTES).writeZero(PAGE_BYTES);
        int crc = PageChecksum.of(MemorySegment.ofBuffer(page.nioBuffer()));
        Namespace ns = Pages.namespace("evict");
        List<StoreKey> keys;
        try (Pages pages = new Pages()) {
            keys = pages.keys(ns, (int) (SLAB_BYTES / PAGE_BYTES) + 1);
        }
        try (SlabCache cache = new SlabCache(ServerConfig.from(settings), Optional.empty(), KvEventSink.disabled())) {
            for (StoreKey key : keys) {
                SlabWrites.PutOutcome put = cache.writes.put(
                        key, page, PAGE_BYTES, crc, EvictionChoice.until(Deadline.after(Duration.ofSeconds(10))));
                SlabWrites.Stored stored = assertInstanceOf(SlabWrites.Stored.class, put);
                assertEquals(PageStatus.OK, stored.status());
                if (stored.pinned() != null) {
                    cache.pages.unpin(stored.pinned());
                }
            }
            assertTrue(cache.counters.evictedPages.sum() > 0, "the last put evicted");
            assertTrue(
                    cache.space.freeBytes() <= Eviction.FREE_TARGET_MAX_BYTES,
                    "eviction freed "
                            + cache.space.freeBytes() + " bytes beyond the put's page; the cap is "
                            + Eviction.FREE_TARGET_MAX_BYTES);
            assertEquals(Eviction.FREE_TARGET_MAX_BYTES, Eviction.freeTarget(SLAB_BYTES));
            assertEquals(2L << 20, Eviction.freeTarget(128L << 20), "a small slab keeps 1/64");
        } finally {
            page.release();
            TestDaemon.delete(dir);
        }
    }
}
