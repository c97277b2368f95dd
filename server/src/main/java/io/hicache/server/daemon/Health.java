package io.hicache.server.daemon;

import io.hicache.core.util.RateLimitedLog;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Whether puts are failing for a reason the daemon knows, for {@code /health} (503) and the
 * {@code hicache_server_healthy} gauge: the slab has had no room for a put (every page pinned, or not yet written to
 * L3, so none can be evicted), the L3 store fails the write-behind, or a background loop failed a round. Each is a state, not an event: it holds from a
 * failure until the next success of the same kind, and lapses after {@link #WINDOW} without a failure (a daemon nobody
 * writes to is not failing). Entering either state is logged once, then at most once a minute.
 *
 * <p>Thread-safe: the writes and the write-behind report to it; the metrics endpoint reads it.
 */
final class Health {
    static final Duration WINDOW = Duration.ofSeconds(60);
    private static final System.Logger LOG = System.getLogger(Health.class.getName());
    private static final long NEVER = Long.MIN_VALUE;

    private final AtomicLong lastNoRoomNanos = new AtomicLong(NEVER);
    private final AtomicLong lastStoredNanos = new AtomicLong(NEVER);
    private final AtomicLong lastStoreFailureNanos = new AtomicLong(NEVER);
    private final AtomicLong lastStoreWriteNanos = new AtomicLong(NEVER);
    private volatile String lastStoreFailure = "";
    private final AtomicLong lastLoopFailureNanos = new AtomicLong(NEVER);
    private volatile String lastLoopFailure = "";
    private final RateLimitedLog loopLog = new RateLimitedLog(LOG, Level.ERROR, Duration.ofMinutes(1));
    private final RateLimitedLog noRoomLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofMinutes(1));
    private final RateLimitedLog storeLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofMinutes(1));

    /** A put (or reservation) found no room in the slab by its deadline, though it was small enough to fit. */
    void noRoom(long slabBytes, long freeBytes, int pendingWriteBehind) {
        lastNoRoomNanos.set(System.nanoTime());
        noRoomLog.log(
                "puts are refused: the host slab has no room (" + freeBytes + " of " + slabBytes
                        + " bytes free, none evictable in time: pages are pinned by readers, or " + pendingWriteBehind
                        + " are not yet written to L3); a larger server.host-size, a faster L3, or fewer pages held would help");
    }

    /** A put was stored in the slab. */
    void stored() {
        lastStoredNanos.set(System.nanoTime());
    }

    /** A write-behind to the L3 store failed with {@code cause}. */
    void storeFailed(String cause) {
        lastStoreFailure = cause;
        lastStoreFailureNanos.set(System.nanoTime());
        storeLog.log("the L3 store fails the write-behind (" + cause + "): acknowledged pages wait in the slab, which "
                + "fills up and then refuses puts if it goes on");
    }

    /** A write-behind to the L3 store succeeded. */
    void storeWrote() {
        lastStoreWriteNanos.set(System.nanoTime());
    }

    /**
     * A background loop's round failed with {@code error} (a bug, a store breaking its contract): the loop goes on
     * with its next round, and the daemon says it is failing for {@link #WINDOW} after the latest such failure.
     */
    void loopFailed(String loop, Throwable error) {
        lastLoopFailure = loop + " (" + error + ")";
        lastLoopFailureNanos.set(System.nanoTime());
        loopLog.log("the " + loop + " loop failed a round (" + error + "); it goes on, and /health says failing for "
                + WINDOW.toSeconds() + " s after the latest such failure");
    }

    /** Why puts are failing now, or null when they are not. */
    @Nullable
    String failing() {
        long now = System.nanoTime();
        if (current(lastNoRoomNanos.get(), lastStoredNanos.get(), now)) {
            return "failing: puts are refused, the host slab has no room (pages pinned, or not yet written to L3)";
        }
        if (current(lastStoreFailureNanos.get(), lastStoreWriteNanos.get(), now)) {
            return "failing: the L3 store fails the write-behind: " + lastStoreFailure;
        }
        if (current(lastLoopFailureNanos.get(), NEVER, now)) {
            return "failing: a background loop failed: " + lastLoopFailure;
        }
        return null;
    }

    /** A failure at {@code failed} with no success after it, within the window. */
    private static boolean current(long failed, long succeeded, long now) {
        return failed != NEVER && (succeeded == NEVER || failed - succeeded > 0) && now - failed < WINDOW.toNanos();
    }
}
