package io.hicache.core;

import io.hicache.core.util.Checks;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A point in time by which an operation must finish, and a switch that cancels it earlier.
 *
 * <p>Every operation that waits (store calls, copies, transfers, protocol requests) takes one. An operation
 * that sees its deadline pass or its deadline cancelled stops as soon as it safely can and reports the
 * unfinished parts as timed out or cancelled; it never leaves the caller waiting past the deadline for
 * work it has given up on. Deadlines use {@link System#nanoTime()}, so wall-clock changes do not move them.
 *
 * <p>Thread-safe: one deadline may be shared by all the parts of a batch and cancelled from any thread.
 */
public final class Deadline {
    private final long expiresAtNanos;
    private volatile boolean cancelled;

    private Deadline(long expiresAtNanos) {
        this.expiresAtNanos = expiresAtNanos;
    }

    /** A deadline {@code timeout} from now. */
    public static Deadline after(Duration timeout) {
        Checks.requireArgument(!timeout.isNegative(), "timeout must not be negative: %s", timeout);
        return afterNanos(saturatedNanos(timeout));
    }

    /** A deadline {@code nanos} nanoseconds from now. */
    public static Deadline afterNanos(long nanos) {
        Checks.requireArgument(nanos >= 0, "timeout must not be negative: %d ns", nanos);
        long now = System.nanoTime();
        // Saturate rather than overflow: a deadline centuries away is as good as none.
        long at = now + nanos < now ? Long.MAX_VALUE : now + nanos;
        return new Deadline(at);
    }

    /** A deadline {@code amount} {@code unit}s from now. */
    public static Deadline after(long amount, TimeUnit unit) {
        return afterNanos(unit.toNanos(amount));
    }

    /** A deadline that has already passed: useful to probe without waiting. */
    public static Deadline expired() {
        return new Deadline(System.nanoTime() - 1);
    }

    /** Nanoseconds left, zero once passed or cancelled. */
    public long remainingNanos() {
        if (cancelled) {
            return 0;
        }
        return Math.max(0, expiresAtNanos - System.nanoTime());
    }

    /** Time left, zero once passed or cancelled. */
    public Duration remaining() {
        return Duration.ofNanos(remainingNanos());
    }

    /** True once the time has run out (whether or not it was also cancelled). */
    public boolean isExpired() {
        return expiresAtNanos - System.nanoTime() <= 0;
    }

    /** Asks every operation using this deadline to stop early. Idempotent. */
    public void cancel() {
        cancelled = true;
    }

    /** True once {@link #cancel()} was called. */
    public boolean isCancelled() {
        return cancelled;
    }

    /** True when work under this deadline should stop: cancelled or expired. */
    public boolean isOver() {
        return cancelled || isExpired();
    }

    private static long saturatedNanos(Duration d) {
        try {
            return d.toNanos();
        } catch (ArithmeticException tooLong) {
            return Long.MAX_VALUE;
        }
    }

    @Override
    public String toString() {
        if (cancelled) {
            return "Deadline[cancelled]";
        }
        long left = expiresAtNanos - System.nanoTime();
        return left <= 0 ? "Deadline[expired]" : "Deadline[" + Duration.ofNanos(left) + " left]";
    }
}
