package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.util.Checks;

/**
 * Whether finding room for a page may evict pages and wait for the write-behind to make some evictable: never (a
 * request on an event loop, which must not block: a page that needs more is deferred to a worker), or until a
 * deadline (a worker). Immutable.
 */
sealed interface EvictionChoice {
    /** Free room only: nothing is evicted, nothing waited for. */
    EvictionChoice NONE = new None();

    /** Evicting, and waiting for the write-behind, until {@code deadline}. */
    static EvictionChoice until(Deadline deadline) {
        return new Until(Checks.checkNotNull(deadline, "deadline"));
    }

    /** See {@link #NONE}. */
    record None() implements EvictionChoice {}

    /** See {@link #until}. */
    record Until(Deadline deadline) implements EvictionChoice {}
}
