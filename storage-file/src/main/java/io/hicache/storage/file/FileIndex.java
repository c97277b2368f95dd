package io.hicache.storage.file;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;

/**
 * What the file store holds, in memory: one entry per page file, with its size, when it was last used (a logical
 * clock), and how many reads are using it. The store owns its root exclusively, so this index is the truth about
 * which pages are stored; it is rebuilt from the files when the store opens.
 *
 * <p>An entry is first <em>writing</em> (its file not yet renamed into place; other puts of the key wait on it,
 * gets miss), then <em>stored</em>, and finally removed. Removal has one winner: whoever takes the entry out of the
 * map deletes the file and gives its bytes back. Eviction also <em>claims</em> the entry first (readers count
 * {@code 0 -> -1}), so it never removes a page that a get is reading. Thread-safe.
 */
final class FileIndex {
    /** One page file. */
    static final class Entry {
        final long fileBytes;
        /** Completes true when the file is in place, false when the write failed. */
        final CompletableFuture<Boolean> written = new CompletableFuture<>();
        private final AtomicInteger readers = new AtomicInteger();
        private volatile long lastUse;

        Entry(long fileBytes) {
            this.fileBytes = fileBytes;
        }

        boolean isStored() {
            return written.getNow(false);
        }

        /** Starts a read; false when the entry is being evicted. */
        boolean pin() {
            while (true) {
                int n = readers.get();
                if (n < 0) {
                    return false;
                }
                if (readers.compareAndSet(n, n + 1)) {
                    return true;
                }
            }
        }

        void unpin() {
            readers.decrementAndGet();
        }

        /** Claims the entry for eviction: only when nothing reads it, and then no read can start. */
        boolean claim() {
            return readers.compareAndSet(0, -1);
        }

        long lastUse() {
            return lastUse;
        }
    }

    private final ConcurrentHashMap<PageId, Entry> entries = new ConcurrentHashMap<>();
    private final AtomicLong clock = new AtomicLong();
    private final AtomicLong storedPages = new AtomicLong();
    private final AtomicLong storedBytes = new AtomicLong();

    /** Adds a page found on disk, as stored; pages must come oldest first. */
    void addFound(PageId id, long fileBytes) {
        Entry e = new Entry(fileBytes);
        e.lastUse = clock.incrementAndGet();
        e.written.complete(true);
        entries.put(id, e);
        storedPages.incrementAndGet();
        storedBytes.addAndGet(fileBytes);
    }

    Entry get(PageId id) {
        return entries.get(id);
    }

    /** Starts writing {@code id}: returns the new entry, or the existing one (stored or being written) instead. */
    Entry beginWrite(PageId id, long fileBytes, boolean[] created) {
        Entry mine = new Entry(fileBytes);
        Entry existing = entries.putIfAbsent(id, mine);
        created[0] = existing == null;
        return existing == null ? mine : existing;
    }

    /** The write of {@code e} succeeded: the page is stored. */
    void written(Entry e) {
        e.lastUse = clock.incrementAndGet();
        storedPages.incrementAndGet();
        storedBytes.addAndGet(e.fileBytes);
        e.written.complete(true);
    }

    /** The write of {@code e} failed: forget it. */
    void writeFailed(PageId id, Entry e) {
        entries.remove(id, e);
        e.written.complete(false);
    }

    void touch(Entry e) {
        e.lastUse = clock.incrementAndGet();
    }

    /** Takes a stored entry out; true for the one caller that did (it then deletes the file). */
    boolean remove(PageId id, Entry e) {
        if (!e.isStored() || !entries.remove(id, e)) {
            return false;
        }
        storedPages.decrementAndGet();
        storedBytes.addAndGet(-e.fileBytes);
        return true;
    }

    /** Stored pages that match, for clearing. */
    List<Map.Entry<PageId, Entry>> stored(Predicate<PageId> which) {
        List<Map.Entry<PageId, Entry>> out = new ArrayList<>();
        entries.forEach((id, e) -> {
            if (e.isStored() && which.test(id)) {
                out.add(Map.entry(id, e));
            }
        });
        return out;
    }

    /** True when a page of {@code namespaceId} is being written. */
    boolean writing(String namespaceId) {
        for (Map.Entry<PageId, Entry> e : entries.entrySet()) {
            if (!e.getValue().written.isDone() && e.getKey().namespaceId().equals(namespaceId)) {
                return true;
            }
        }
        return false;
    }

    /** Stored pages, least recently used first: eviction's order. */
    List<Map.Entry<PageId, Entry>> leastRecentlyUsed() {
        List<Map.Entry<PageId, Entry>> all = stored(id -> true);
        all.sort(Comparator.comparingLong(e -> e.getValue().lastUse()));
        return all;
    }

    long storedPages() {
        return storedPages.get();
    }

    long storedBytes() {
        return storedBytes.get();
    }
}
