package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.testkit.PagePattern;
import io.hicache.testkit.RandomKeys;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Issue 39, part 3: {@code server.host-keep}. A daemon stopped gracefully leaves its slab and an index of it; the next
 * one started on the same folder serves those pages at once, each checked against its CRC-32C as it is taken back (a
 * page damaged meanwhile is a miss, never bytes). A daemon that is not told to keep removes its slab as before.
 */
class WarmSlabTest {
    private static final Namespace NS = Namespace.of("warm", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    private static final Map<String, String> KEEP = Map.of("server.store", "none", "server.host-keep", "true");

    private static List<StoreKey> keys(int n) {
        return RandomKeys.of(NS, n, 7);
    }

    private static BatchResult get(RemotePageStore client, List<StoreKey> keys, Arena arena) throws Exception {
        List<MemorySegment> targets = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            targets.add(arena.allocate(20_000));
        }
        BatchResult r = client.get(PageBatch.of(keys, targets), Deadline.after(Duration.ofSeconds(5)))
                .get();
        for (int i = 0; i < keys.size(); i++) {
            if (r.status(i) == PageStatus.OK) {
                assertTrue(PagePattern.matches(targets.get(i), keys.get(i)), "page " + i + " has wrong bytes");
            }
        }
        return r;
    }

    @Test
    void aGracefulStopKeepsTheSlabForTheNextStartWhichChecksEveryPage() throws Exception {
        Path hostDir = Files.createTempDirectory(Path.of("/dev/shm"), "hicache-warm-");
        Path fileRoot = Files.createTempDirectory("hicache-warm-l3-");
        List<StoreKey> keys = keys(50);
        TestDaemon first = TestDaemon.start(KEEP, hostDir, fileRoot);
        long damagedAt;
        try (Arena arena = Arena.ofShared()) {
            try (RemotePageStore c = first.client()) {
                PageBatch.Builder b = PageBatch.builder(keys.size());
                for (StoreKey k : keys) {
                    MemorySegment page = arena.allocate(20_000);
                    PagePattern.fill(page, k);
                    b.add(k, page);
                }
                assertEquals(
                        keys.size(),
                        c.put(b.build(), Deadline.after(Duration.ofSeconds(5)))
                                .get()
                                .successCount());
            }
            SlabPage victim = first.server.cache.pages.pin(keys.get(7));
            damagedAt = victim.offset + 100;
            first.server.cache.pages.unpin(victim);
            first.server.close(); // graceful: the slab and its index stay
            Path slab;
            try (Stream<Path> files = Files.list(hostDir)) {
                slab = files.filter(f -> f.toString().endsWith(".slab"))
                        .findFirst()
                        .orElseThrow();
            }
            assertTrue(Files.exists(SlabSpace.indexOf(slab)), "the index beside the kept slab");
            try (FileChannel ch = FileChannel.open(slab, StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(new byte[] {42, 42, 42}), damagedAt); // damage page 7 while no daemon runs
            }
            TestDaemon second = TestDaemon.start(KEEP, hostDir, fileRoot);
            try (RemotePageStore c = second.client()) {
                assertEquals(keys.size() - 1, second.server.cache.pageCount(), "every page but the damaged one");
                BatchResult r = get(c, keys, arena);
                for (int i = 0; i < keys.size(); i++) {
                    assertEquals(i == 7 ? PageStatus.MISS : PageStatus.OK, r.status(i), "page " + i);
                }
            } finally {
                second.server.close();
            }
            // a daemon not told to keep removes what was kept
            TestDaemon third = TestDaemon.start(Map.of("server.store", "none"), hostDir, fileRoot);
            try {
                assertEquals(0, third.server.cache.pageCount());
                try (Stream<Path> files = Files.list(hostDir)) {
                    assertEquals(
                            1, files.filter(f -> f.toString().contains(".slab")).count(), "only its own slab");
                }
            } finally {
                third.close(); // deletes both folders
            }
        }
    }
}
