package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import java.util.concurrent.TimeUnit;

/** How long a request's thread waits, for L3 or for the write-behind, within its deadline. Stateless. */
final class Waits {
    /** The longest one wait for the write-behind's progress lasts, so that the deadline is looked at again soon. */
    private static final long POLL_MILLIS = 50;

    private Waits() {}

    /**
     * How long to wait for a future of L3 whose work {@code deadline} bounds: the time left and a second more, so that
     * a store that keeps its deadline answers (TIMED_OUT) before the wait gives up.
     */
    static long l3Millis(Deadline deadline) {
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos())) + 1_000;
    }

    /** One wait for the write-behind: at most {@link #POLL_MILLIS}, at least 1 ms, and no longer than the time left. */
    static long pollMillis(Deadline deadline) {
        return Math.min(POLL_MILLIS, Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos())));
    }
}
