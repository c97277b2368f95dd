package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.config.Settings;
import io.hicache.core.memory.DeviceBuffers;
import io.hicache.core.memory.DeviceLayout;
import io.hicache.core.memory.DevicePageAllocator;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 19, part 1: an engine runs attention on the cache's pool. It allocates the KV memory itself and the cache
 * adopts it, hands out pages through the engine's allocator, and says where each layer's K and V rows are; what the
 * engine writes at those addresses is what the cache backs up and serves.
 */
class EngineMemoryTest {
    private static final int PAGES = 32;

    /** The engine's page allocator: the pool's own kind, counting the cache's calls. */
    private static final class CountingAllocator implements DevicePageAllocator {
        final PageAllocator inner = new PageAllocator("engine", PAGES);
        final AtomicInteger allocations = new AtomicInteger();

        @Override
        public int capacity() {
            return inner.capacity();
        }

        @Override
        public int available() {
            return inner.available();
        }

        @Override
        public int[] tryAllocate(int count) {
            allocations.incrementAndGet();
            return inner.tryAllocate(count);
        }

        @Override
        public void free(int... pages) {
            inner.free(pages);
        }

        @Override
        public boolean isAllocated(int page) {
            return inner.isAllocated(page);
        }
    }

    @Test
    void theCacheServesWhatTheEngineWroteAtTheAddressesItWasGiven() throws Exception {
        Path hostDir = Files.createTempDirectory("hicache-engine-memory");
        PageFormat format = new PageFormat(TestEngine.GEOMETRY, 4, HostLayout.PAGE_FIRST_DIRECT);
        long bytes = DeviceLayout.poolBytes(format, PAGES);
        CountingAllocator allocator = new CountingAllocator();
        Map<String, String> s = settings("host.dir", hostDir.toString(), "hicache-mem-layout", "page_first_direct");
        Settings.Builder b = Settings.builder();
        s.forEach(b::flag);
        try (Arena engineMemory = Arena.ofShared();
                EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(64L << 20, 2)) {
            MemorySegment kv = engineMemory.allocate(bytes, 4096); // the engine's KV buffers
            int[] p = prompt(81_000, 16); // 4 pages
            try (HiCache cache = HiCache.builder()
                    .config(HiCacheConfig.from(b.build()))
                    .namespace(TestEngine.NS)
                    .geometry(TestEngine.GEOMETRY)
                    .devicePages(PAGES)
                    .runtime(runtime)
                    .deviceMemory(kv.address(), bytes)
                    .pageAllocator(allocator)
                    .open()) {
                DeviceBuffers buffers = cache.device().buffers();
                assertEquals(kv.address(), buffers.layers().getFirst().keyAddress(), "layer 0's K is where it begins");
                try (CacheRequest r = cache.request("first", p)) {
                    int[] pages = r.allocate(4);
                    assertTrue(allocator.allocations.get() > 0, "the cache asked the engine's allocator");
                    forEachRow(
                            buffers, pages, (i, at) -> kv.set(ValueLayout.JAVA_LONG_UNALIGNED, at - kv.address(), i));
                    r.commit(p, pages, true); // write-through: backed up to the host from these addresses
                }
                assertTrue(cache.awaitIdle(Duration.ofSeconds(10)));
                try (CacheRequest other = cache.request("other", prompt(90_000, 4 * PAGES))) {
                    other.allocate(PAGES); // the whole pool: the first prompt's pages go to the host only
                }
                assertTrue(cache.awaitIdle(Duration.ofSeconds(10)));
                try (CacheRequest again = cache.request("again", p)) {
                    assertEquals(16, again.hostTokens(), "evicted to the host");
                    assertTrue(again.loadBack(Integer.MAX_VALUE).await(Duration.ofSeconds(10)));
                    int[] prefix = again.prefixPages();
                    assertEquals(4, prefix.length);
                    // what the engine wrote is back, at the addresses of the pages it came back to
                    forEachRow(
                            buffers,
                            prefix,
                            (i, at) -> assertEquals(i, kv.get(ValueLayout.JAVA_LONG_UNALIGNED, at - kv.address())));
                }
                assertTrue(cache.awaitIdle(Duration.ofSeconds(10)));
                cache.admin().flush(Duration.ofSeconds(10));
                assertEquals(PAGES, allocator.available(), "every page back with the engine's allocator");
            }
        } finally {
            try (var files = Files.walk(hostDir)) {
                for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(f);
                }
            }
        }
    }

    @Test
    void anAllocatorOfAnotherSizeIsRefused() {
        PageAllocator wrong = new PageAllocator("engine", PAGES + 1);
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(64L << 20, 2)) {
            assertThrows(
                    IllegalArgumentException.class,
                    () -> HiCache.builder()
                            .config(HiCacheConfig.from(Settings.builder()
                                    .flag("hicache-tiers", "device-only")
                                    .build()))
                            .namespace(TestEngine.NS)
                            .geometry(TestEngine.GEOMETRY)
                            .devicePages(PAGES)
                            .runtime(runtime)
                            .pageAllocator(wrong)
                            .open());
        }
    }

    /** What an engine step visits: each row's marker and its device address. */
    @FunctionalInterface
    private interface RowVisitor {
        void row(long marker, long address);
    }

    /** Every (page i, layer, part, token) row of {@code pages}, with a marker unique to it. */
    private static void forEachRow(DeviceBuffers buffers, int[] pages, RowVisitor visitor) {
        for (int i = 0; i < pages.length; i++) {
            for (int layer = 0; layer < buffers.layers().size(); layer++) {
                for (int part = 0; part < 2; part++) {
                    for (int t = 0; t < buffers.pageSizeTokens(); t++) {
                        long marker = 0x5EED_0000_0000_0000L
                                | ((long) i << 24)
                                | ((long) layer << 16)
                                | ((long) part << 8)
                                | t;
                        visitor.row(marker, buffers.rowAddress(layer, part, pages[i], t));
                    }
                }
            }
        }
    }
}
