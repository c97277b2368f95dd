package io.hicache.core.store;

import io.hicache.core.util.Checks;
import org.jspecify.annotations.Nullable;

/**
 * What became of one page in a store call: its status and, where the store says, why. The per-page value a store
 * computes before it fills a {@link BatchResult} ({@link BatchResult.Builder#set(int, PageOutcome)}). Immutable.
 *
 * @param status the page's status
 * @param detail why, for a status that needs explaining; null otherwise
 */
public record PageOutcome(PageStatus status, @Nullable String detail) {
    /** The page was read or written. */
    public static final PageOutcome OK = new PageOutcome(PageStatus.OK, null);
    /** The page was stored already; the put skipped it. */
    public static final PageOutcome EXISTS = new PageOutcome(PageStatus.EXISTS, null);
    /** The store has no such page. */
    public static final PageOutcome MISS = new PageOutcome(PageStatus.MISS, null);

    public PageOutcome {
        Checks.checkNotNull(status, "status");
    }

    /** {@code status} with no detail. */
    public static PageOutcome of(PageStatus status) {
        return new PageOutcome(status, null);
    }

    /** {@code status} because of {@code detail}. */
    public static PageOutcome of(PageStatus status, String detail) {
        return new PageOutcome(status, detail);
    }
}
