package io.hicache.core.cache;

import io.hicache.core.tree.RadixTree;
import io.hicache.core.util.Checks;
import java.time.Duration;

/**
 * How long a request's cached prefix is worth keeping: a priority class and how long it holds after each hit
 * (SGLang's {@code priority} and {@code retention_seconds}). Given to {@link HiCache#request(String, String, int[],
 * Retention)}; the pages the request hits or caches take it (docs/embedding.md, "Retention, demote and prefix hits"):
 *
 * <ul>
 *   <li>A page's <b>effective priority</b> is its class until its deadline, then 0. Each hit moves the deadline to
 *       now plus its retention, so a class decays only when the page is idle.
 *   <li>A page keeps the highest class and the longest retention of the hits since its class last decayed; a hit of
 *       a lower class (or {@link #NONE}) only refreshes its deadline. So no request's class decays on a page sooner
 *       than that request asked, though a page may hold a high class for a lower class's longer retention.
 *   <li>Eviction, on the device and on the host, takes the lowest effective priority first, then the eviction
 *       policy's order (LRU or LFU), and stays leaf-first: a cached prefix never has a hole.
 *   <li>A class with a retention of zero never holds: such a request counts as priority 0.
 * </ul>
 *
 * <p>Immutable.
 *
 * @param priority the class, 0 (the default: evicted by recency alone) to 99
 * @param duration how long the class holds after each hit; zero (the default) means it never holds
 */
public record Retention(int priority, Duration duration) {
    /** No class: priority 0, no retention; what a request made without one has. */
    public static final Retention NONE = new Retention(0, Duration.ZERO);

    /**
     * Checks the range.
     *
     * @throws IllegalArgumentException when {@code priority} is not within 0-99 or {@code duration} is negative
     */
    public Retention {
        Checks.requireArgument(
                priority >= 0 && priority <= RadixTree.MAX_PRIORITY,
                "priority must be within 0-%s, was %s",
                RadixTree.MAX_PRIORITY,
                priority);
        Checks.checkNotNull(duration, "duration");
        Checks.requireArgument(!duration.isNegative(), "the retention must not be negative, was %s", duration);
    }

    /** {@code priority} held for {@code duration} after each hit; see {@link Retention}. */
    public static Retention of(int priority, Duration duration) {
        return new Retention(priority, duration);
    }

    /** The retention in whole milliseconds, rounded up so that a positive one is never 0; capped far beyond use. */
    long millis() {
        long cap = Long.MAX_VALUE / 4;
        if (duration.compareTo(Duration.ofMillis(cap)) >= 0) {
            return cap;
        }
        return duration.toMillis() + (duration.toNanosPart() % 1_000_000 == 0 ? 0 : 1);
    }
}
