package io.hicache.storage.file;

import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.usage.PageUsageIndex.Order;
import io.hicache.core.util.Checks;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;

/**
 * What the file store holds, in memory: the stored pages, least recently used first, with their files' sizes, in a
 * {@link PageUsageIndex}; and the writes under way. The store owns its root exclusively, so this index is the truth
 * about which pages are stored; it is rebuilt from the files when the store opens.
 *
 * <p>A page is first <em>being written</em> (its file not yet renamed into place; other puts of the key wait on the
 * write, gets miss), then <em>stored</em> (in the usage index), and finally removed. Removal has one winner: whoever
 * takes the entry out of the usage index deletes the file. A read pins the entry; eviction claims it, and a claimed
 * entry cannot be pinned, so eviction never removes a page that a get is reading. Thread-safe.
 */
final class FileIndex {
    private final PageUsageIndex<PageId> stored =
            PageUsageIndex.<PageId>builder(Order.RECENCY).build();
    /** Writes under way: each completes true when its file is in place, false when the write failed. */
    private final ConcurrentHashMap<PageId, CompletableFuture<Boolean>> writing = new ConcurrentHashMap<>();

    /** The stored pages: entries by page, bytes of their files. */
    PageUsageIndex<PageId> stored() {
        return stored;
    }

    /** Adds a page found on disk, as stored; pages must come least recently used first. */
    void addFound(PageId id, long fileBytes) {
        stored.insert(id, fileBytes);
    }

    /**
     * Starts writing {@code id}: null when the caller is to write it (and then calls {@link #written} or
     * {@link #writeFailed}); otherwise the outcome of the write under way, or a true one if the page is stored.
     */
    @Nullable
    CompletableFuture<Boolean> beginWrite(PageId id) {
        CompletableFuture<Boolean> mine = new CompletableFuture<>();
        CompletableFuture<Boolean> other = writing.putIfAbsent(id, mine);
        if (other != null) {
            return other;
        }
        // Checked after taking the write, so that a write finishing meanwhile is seen either here or as `other`.
        if (stored.contains(id)) {
            writing.remove(id, mine);
            mine.complete(true);
            return mine;
        }
        return null;
    }

    /** The caller's write of {@code id} succeeded: the page is stored, as the most recently used. */
    void written(PageId id, long fileBytes) {
        stored.insert(id, fileBytes);
        Checks.checkNotNull(writing.remove(id), "the caller's write (begun by beginWrite)")
                .complete(true);
    }

    /** The caller's write of {@code id} failed: forget it. */
    void writeFailed(PageId id) {
        Checks.checkNotNull(writing.remove(id), "the caller's write (begun by beginWrite)")
                .complete(false);
    }

    /** True when a page of {@code namespaceId} is being written. */
    boolean writing(String namespaceId) {
        for (PageId id : writing.keySet()) {
            if (id.namespaceId().equals(namespaceId)) {
                return true;
            }
        }
        return false;
    }
}
