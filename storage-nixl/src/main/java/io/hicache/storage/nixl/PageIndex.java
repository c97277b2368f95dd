package io.hicache.storage.nixl;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the store holds, for its capacity and its cleaner: page name to stored bytes and last use. Built from a scan
 * when the store opens, kept up to date by its puts, gets and deletes. Pages other stores on the same folders or
 * bucket write are not in it until the next open. Thread-safe.
 */
final class PageIndex {
    private static final class Entry {
        final long bytes;
        volatile long lastUsedMillis;

        Entry(long bytes, long lastUsedMillis) {
            this.bytes = bytes;
            this.lastUsedMillis = lastUsedMillis;
        }
    }

    private final Map<String, Entry> entries = new ConcurrentHashMap<>();
    private final AtomicLong bytes = new AtomicLong();

    /** Records a stored page; returns the bytes of the entry it replaced, 0 if none. */
    long add(String name, long storedBytes, long millis) {
        Entry old = entries.put(name, new Entry(storedBytes, millis));
        bytes.addAndGet(storedBytes - (old == null ? 0 : old.bytes));
        return old == null ? 0 : old.bytes;
    }

    boolean contains(String name) {
        return entries.containsKey(name);
    }

    void touch(String name, long millis) {
        Entry e = entries.get(name);
        if (e != null) {
            e.lastUsedMillis = millis;
        }
    }

    /** Forgets a page; returns its bytes, 0 if it was not known. */
    long remove(String name) {
        Entry e = entries.remove(name);
        if (e == null) {
            return 0;
        }
        bytes.addAndGet(-e.bytes);
        return e.bytes;
    }

    /** Forgets every page whose name starts with {@code prefix} (all for null); returns their bytes. */
    long removeAll(String prefix) {
        long freed = 0;
        for (String name : List.copyOf(entries.keySet())) {
            if (prefix == null || name.startsWith(prefix)) {
                freed += remove(name);
            }
        }
        return freed;
    }

    /** The least recently used pages holding at least {@code wanted} bytes (or all there are), oldest first. */
    List<String> oldest(long wanted) {
        List<Map.Entry<String, Entry>> all = new ArrayList<>(entries.entrySet());
        all.sort(Comparator.comparingLong(e -> e.getValue().lastUsedMillis));
        List<String> picked = new ArrayList<>();
        long sum = 0;
        for (Map.Entry<String, Entry> e : all) {
            if (sum >= wanted) {
                break;
            }
            picked.add(e.getKey());
            sum += e.getValue().bytes;
        }
        return picked;
    }

    int pages() {
        return entries.size();
    }

    long bytes() {
        return bytes.get();
    }
}
