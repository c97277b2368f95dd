package io.hicache.core.util;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * A log line that is written at most once per interval, saying how many like it were not written since: for
 * failures a client or a broken store can cause at any rate, which must be seen but must not flood the log.
 *
 * <p>Thread-safe.
 */
public final class RateLimitedLog {
    private final System.Logger log;
    private final Level level;
    private final long intervalNanos;
    private final AtomicLong nextAt = new AtomicLong(Long.MIN_VALUE);
    private final AtomicLong suppressed = new AtomicLong();

    /** A line to {@code log} at {@code level}, at most once per {@code interval}. */
    public RateLimitedLog(System.Logger log, Level level, Duration interval) {
        this.log = log;
        this.level = level;
        this.intervalNanos = interval.toNanos();
    }

    /** Writes {@code message} unless a line was written within the interval; then counts it as not written. */
    public void log(String message) {
        log(() -> message);
    }

    /** As {@link #log(String)}, building the message only when it is written: for messages that cost to build. */
    public void log(Supplier<String> message) {
        long now = System.nanoTime();
        long next = nextAt.get();
        if ((next != Long.MIN_VALUE && now - next < 0) || !nextAt.compareAndSet(next, now + intervalNanos)) {
            suppressed.incrementAndGet();
            return;
        }
        long skipped = suppressed.getAndSet(0);
        String text = message.get();
        log.log(level, skipped == 0 ? text : text + " (" + skipped + " more like it not logged)");
    }
}
