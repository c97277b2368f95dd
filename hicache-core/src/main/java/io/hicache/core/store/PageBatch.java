package io.hicache.core.store;

import io.hicache.core.key.StoreKey;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Keys paired with the off-heap memory of their pages: the sources of a put or the targets of a get.
 * Validated once at construction: same number of keys and pages, nothing null, every page a non-empty
 * native segment (page bytes never live on the Java heap) that other threads may access (not from a confined
 * arena: stores work on their own threads).
 *
 * <p>Immutable, but it does not own the memory: the caller keeps the segments alive, and must not touch a
 * get's targets until the get's future completes.
 */
public final class PageBatch {
    /** Stands for any thread but the caller's: never started. */
    private static final Thread ANOTHER_THREAD = Thread.ofPlatform().unstarted(() -> {});

    private final List<StoreKey> keys;
    private final MemorySegment[] pages;

    private PageBatch(List<StoreKey> keys, MemorySegment[] pages) {
        this.keys = keys;
        this.pages = pages;
    }

    /**
     * Pairs {@code keys[i]} with {@code pages[i]}.
     *
     * @throws IllegalArgumentException naming the index of the first bad entry
     */
    public static PageBatch of(List<StoreKey> keys, List<MemorySegment> pages) {
        Checks.checkNotNull(keys, "keys");
        Checks.checkNotNull(pages, "pages");
        Checks.requireArgument(
                keys.size() == pages.size(),
                "a batch needs one page per key: %d keys, %d pages",
                keys.size(),
                pages.size());
        MemorySegment[] segments = new MemorySegment[pages.size()];
        for (int i = 0; i < segments.length; i++) {
            Checks.checkNotNull(keys.get(i), "keys[" + i + "]");
            segments[i] = checkPage(pages.get(i), i);
        }
        return new PageBatch(List.copyOf(keys), segments);
    }

    /** Starts a batch of about {@code expectedSize} pages. */
    public static Builder builder(int expectedSize) {
        return new Builder(expectedSize);
    }

    private static MemorySegment checkPage(MemorySegment page, int index) {
        Checks.checkNotNull(page, "pages[" + index + "]");
        Checks.requireArgument(
                page.isNative(), "pages[%d] is a heap segment: pages must be off-heap (native) memory", index);
        Checks.requireArgument(page.byteSize() > 0, "pages[%d] is empty: a page has at least 1 byte", index);
        // Stores do I/O on their own threads: memory only its creating thread may touch fails there, late and per page.
        Checks.requireArgument(
                page.isAccessibleBy(ANOTHER_THREAD),
                "pages[%d] is confined to the thread that allocated "
                        + "it, so a store's threads cannot read or write it: allocate pages from a shared or automatic arena",
                index);
        return page;
    }

    public int size() {
        return pages.length;
    }

    public boolean isEmpty() {
        return pages.length == 0;
    }

    public StoreKey key(int index) {
        return keys.get(index);
    }

    public MemorySegment page(int index) {
        return pages[index];
    }

    /** The keys, in order (unmodifiable). */
    public List<StoreKey> keys() {
        return keys;
    }

    /** Sum of the pages' sizes. */
    public long totalBytes() {
        long total = 0;
        for (MemorySegment page : pages) {
            total += page.byteSize();
        }
        return total;
    }

    @Override
    public String toString() {
        return "PageBatch[" + pages.length + " pages, " + totalBytes() + " bytes]";
    }

    /** Builds a batch one page at a time. Not thread-safe. */
    public static final class Builder {
        private final List<StoreKey> keys;
        private final List<MemorySegment> pages;

        private Builder(int expectedSize) {
            keys = new ArrayList<>(expectedSize);
            pages = new ArrayList<>(expectedSize);
        }

        public Builder add(StoreKey key, MemorySegment page) {
            Checks.checkNotNull(key, "key");
            keys.add(key);
            pages.add(checkPage(page, pages.size()));
            return this;
        }

        public PageBatch build() {
            return new PageBatch(List.copyOf(keys), pages.toArray(MemorySegment[]::new));
        }
    }
}
