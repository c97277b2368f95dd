package io.hicache.core.store.memory;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.PageFormat;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * The reference page store: pages in off-heap memory of this process, each with its CRC-32C, within a fixed
 * capacity (a put that would pass it is {@link PageStatus#REJECTED}; nothing is evicted). It is what the
 * conformance kit is checked against, and a store for tests and demos; it is not persistent and not shared.
 *
 * <p>Thread-safe. Work is done on the calling thread, so every future is already complete. Each page has its
 * own block of native memory ({@link NativeHeap}), freed when the page is deleted or the store closed.
 */
public final class InMemoryPageStore extends AbstractPageStore {
    private final ConcurrentHashMap<StoreKey, Page> pages = new ConcurrentHashMap<>();
    private final long capacityBytes;
    private final AtomicLong storedBytes = new AtomicLong();

    /** One stored page. Its lock guards the memory against a free while a get copies from it. */
    private static final class Page {
        final NativeHeap.Block block;
        final MemorySegment bytes;
        final int checksum;
        boolean freed;

        Page(MemorySegment source) {
            block = NativeHeap.allocate(source.byteSize());
            bytes = block.bytes();
            MemorySegment.copy(source, 0, bytes, 0, source.byteSize());
            checksum = PageChecksum.of(bytes);
        }

        synchronized void free() {
            if (!freed) {
                freed = true;
                block.free();
            }
        }
    }

    /** A store that holds at most {@code capacityBytes} of pages. */
    public InMemoryPageStore(long capacityBytes) {
        super("memory", "process memory", new StoreCapabilities(Set.of(), PageFormat.MAX_PAGE_BYTES, 256));
        this.capacityBytes = Checks.checkPositive(capacityBytes, "capacityBytes");
    }

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        int hits = 0;
        while (hits < keys.size() && !deadline.isOver() && pages.containsKey(keys.get(hits))) {
            hits++;
        }
        return CompletableFuture.completedFuture(hits);
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        BatchResult.Builder result = BatchResult.builder(targets.size());
        for (int i = 0; i < targets.size(); i++) {
            if (deadline.isOver()) {
                result.set(i, PageStatus.stoppedBy(deadline));
                continue;
            }
            Page page = pages.get(targets.key(i));
            if (page == null) {
                result.set(i, PageStatus.MISS);
                continue;
            }
            MemorySegment target = targets.page(i);
            synchronized (page) {
                if (page.freed) {
                    result.set(i, PageStatus.MISS);
                } else if (page.bytes.byteSize() != target.byteSize()) {
                    result.set(
                            i,
                            PageStatus.SIZE_MISMATCH,
                            "stored page is " + page.bytes.byteSize() + " bytes, target is " + target.byteSize());
                } else if (PageChecksum.of(page.bytes) != page.checksum) {
                    // Verified before the copy: a corrupt page never reaches the target.
                    result.set(i, PageStatus.CORRUPT, "checksum mismatch");
                } else {
                    MemorySegment.copy(page.bytes, 0, target, 0, target.byteSize());
                    result.set(i, PageStatus.OK);
                }
            }
        }
        return CompletableFuture.completedFuture(result.build());
    }

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        BatchResult.Builder result = BatchResult.builder(sources.size());
        for (int i = 0; i < sources.size(); i++) {
            if (deadline.isOver()) {
                result.set(i, PageStatus.stoppedBy(deadline));
                continue;
            }
            StoreKey key = sources.key(i);
            if (pages.containsKey(key)) {
                result.set(i, PageStatus.EXISTS);
                continue;
            }
            long size = sources.page(i).byteSize();
            if (storedBytes.addAndGet(size) > capacityBytes) {
                storedBytes.addAndGet(-size);
                result.set(i, PageStatus.REJECTED, "store full: " + capacityBytes + " bytes of capacity");
                continue;
            }
            Page page = new Page(sources.page(i));
            if (pages.putIfAbsent(key, page) != null) {
                page.free();
                storedBytes.addAndGet(-size);
                result.set(i, PageStatus.EXISTS);
            } else {
                result.set(i, PageStatus.OK);
            }
        }
        return CompletableFuture.completedFuture(result.build());
    }

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        BatchResult.Builder result = BatchResult.builder(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            if (deadline.isOver()) {
                result.set(i, PageStatus.stoppedBy(deadline));
            } else {
                result.set(i, remove(keys.get(i)) ? PageStatus.OK : PageStatus.MISS);
            }
        }
        return CompletableFuture.completedFuture(result.build());
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        removeIf(key -> key.namespace().equals(namespace));
        return CompletableFuture.completedFuture(null);
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        removeIf(key -> true);
        return CompletableFuture.completedFuture(null);
    }

    @Override
    protected void doClose() {
        removeIf(key -> true);
    }

    @Override
    protected long storedPages() {
        return pages.size();
    }

    @Override
    protected long storedBytes() {
        return storedBytes.get();
    }

    @Override
    protected long capacityBytes() {
        return capacityBytes;
    }

    /**
     * Runs {@code action} on the bytes stored under {@code key}, holding the page's monitor as its readers do: for
     * tests in this package (they flip a byte to stand for bit rot). False when nothing is stored under it.
     */
    boolean withStoredBytes(StoreKey key, Consumer<MemorySegment> action) {
        Page page = pages.get(key);
        if (page == null) {
            return false;
        }
        synchronized (page) {
            action.accept(page.bytes);
        }
        return true;
    }

    private boolean remove(StoreKey key) {
        Page page = pages.remove(key);
        if (page == null) {
            return false;
        }
        storedBytes.addAndGet(-page.bytes.byteSize());
        page.free();
        return true;
    }

    private void removeIf(Predicate<StoreKey> which) {
        for (StoreKey key : pages.keySet()) {
            if (which.test(key)) {
                remove(key);
            }
        }
    }
}
