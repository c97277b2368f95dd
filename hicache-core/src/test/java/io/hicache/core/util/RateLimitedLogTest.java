package io.hicache.core.util;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** A rate-limited line built by a supplier is built only when it is written. */
class RateLimitedLogTest {
    @Test
    void aSuppressedMessageIsNeverBuilt() {
        RateLimitedLog log = new RateLimitedLog(
                System.getLogger(RateLimitedLogTest.class.getName()), System.Logger.Level.DEBUG, Duration.ofHours(1));
        AtomicInteger built = new AtomicInteger();
        for (int i = 0; i < 100; i++) {
            log.log(() -> "message " + built.incrementAndGet());
        }
        assertEquals(1, built.get(), "only the first of 100 lines within the interval is written, and built");
    }
}
