package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStore;
import io.hicache.testkit.PagePattern;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/** Keys and pattern-filled pages for the daemon's tests, in memory the test owns. Not thread-safe. */
final class Pages implements AutoCloseable {
    private final Arena arena = Arena.ofShared();
    private final SplittableRandom random = new SplittableRandom();

    static Namespace namespace(String tenant) {
        return Namespace.of(tenant + "/" + UUID.randomUUID(), KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    }

    List<StoreKey> keys(Namespace ns, int n) {
        List<StoreKey> keys = new ArrayList<>(n);
        byte[] hash = new byte[PageHash.BYTES];
        for (int i = 0; i < n; i++) {
            random.nextBytes(hash);
            keys.add(ns.key(PageHash.fromBytes(hash, 0)));
        }
        return keys;
    }

    /** Pages holding each key's pattern. */
    PageBatch filled(List<StoreKey> keys, int pageBytes) {
        PageBatch.Builder b = PageBatch.builder(keys.size());
        for (StoreKey k : keys) {
            MemorySegment page = arena.allocate(pageBytes);
            PagePattern.fill(page, k);
            b.add(k, page);
        }
        return b.build();
    }

    /** Targets filled with the sentinel. */
    PageBatch empty(List<StoreKey> keys, int pageBytes) {
        PageBatch.Builder b = PageBatch.builder(keys.size());
        for (StoreKey k : keys) {
            MemorySegment page = arena.allocate(pageBytes);
            PagePattern.fillSentinel(page);
            b.add(k, page);
        }
        return b.build();
    }

    static Deadline deadline() {
        return Deadline.after(Duration.ofSeconds(30));
    }

    static BatchResult put(PageStore store, PageBatch pages) throws Exception {
        return store.put(pages, deadline()).get(60, TimeUnit.SECONDS);
    }

    static BatchResult get(PageStore store, PageBatch targets) throws Exception {
        return store.get(targets, deadline()).get(60, TimeUnit.SECONDS);
    }

    static int hits(PageStore store, List<StoreKey> keys) throws Exception {
        return store.leadingHits(keys, deadline()).get(60, TimeUnit.SECONDS);
    }

    /** How many of {@code keys} are stored, looking at each on its own. */
    static int stored(PageStore store, List<StoreKey> keys) throws Exception {
        int n = 0;
        for (StoreKey k : keys) {
            n += hits(store, List.of(k));
        }
        return n;
    }

    @Override
    public void close() {
        arena.close();
    }
}
