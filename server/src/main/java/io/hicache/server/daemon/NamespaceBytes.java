package io.hicache.server.daemon;

import io.hicache.core.key.Namespace;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The slab bytes of each namespace (the blocks of its pages, of deleted pages a reader still holds, and of rooms
 * reserved or being filled), which its quota bounds, kept only while the namespace holds something: a namespace's
 * entry goes when its bytes return to 0, so a daemon whose clients use a fresh namespace per request (a unique cache
 * salt in {@code extra}) keeps nothing for the namespaces gone. (The usage index frees its own per-namespace state
 * the same way.)
 *
 * <p>Thread-safe: charges of a live namespace are a compare-and-set; an entry is made, revived and dropped inside the
 * map's lock for its namespace.
 */
final class NamespaceBytes {
    /** Changed by compare-and-set from a positive value, or inside the map's lock; 0 only on its way out. */
    private final ConcurrentHashMap<Namespace, AtomicLong> states = new ConcurrentHashMap<>();

    /** Charges {@code bytes} (positive) to {@code ns}, giving it an entry if it has none; returns its bytes now. */
    long charge(Namespace ns, long bytes) {
        AtomicLong s = states.get(ns);
        if (s != null) {
            long now = s.get();
            while (now > 0) {
                if (s.compareAndSet(now, now + bytes)) {
                    return now + bytes;
                }
                now = s.get();
            }
        }
        // No entry, or one at 0 on its way out: made or revived in the map's lock, where an entry is dropped.
        long[] total = {0};
        states.compute(ns, (k, now) -> {
            AtomicLong live = now != null ? now : new AtomicLong();
            total[0] = live.addAndGet(bytes);
            return live;
        });
        return total[0];
    }

    /** Gives back {@code bytes} charged to {@code ns}; its entry goes once it holds nothing. */
    void discharge(Namespace ns, long bytes) {
        AtomicLong s = states.get(ns);
        if (s == null) {
            throw new IllegalStateException("discharge of " + bytes + " bytes from " + ns + ", which holds nothing");
        }
        if (s.addAndGet(-bytes) == 0) {
            states.computeIfPresent(ns, (k, now) -> now != s || s.get() != 0 ? now : null); // unless charged again
        }
    }

    /** The bytes charged to {@code ns} now (0 when it holds nothing). */
    long bytes(Namespace ns) {
        AtomicLong s = states.get(ns);
        return s == null ? 0 : Math.max(0, s.get());
    }

    /** Namespaces holding something now. */
    int namespaces() {
        return states.size();
    }
}
