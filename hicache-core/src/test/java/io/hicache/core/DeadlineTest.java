package io.hicache.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class DeadlineTest {
    @Test
    void expiresAndCancels() {
        Deadline later = Deadline.after(Duration.ofHours(1));
        assertFalse(later.isOver());
        assertTrue(later.remainingNanos() > Duration.ofMinutes(59).toNanos());
        later.cancel();
        assertTrue(later.isOver());
        assertTrue(later.isCancelled());
        assertFalse(later.isExpired());
        assertEquals(0, later.remainingNanos());

        Deadline past = Deadline.expired();
        assertTrue(past.isExpired());
        assertTrue(past.isOver());
        assertFalse(past.isCancelled());
    }

    @Test
    void hugeTimeoutsSaturateInsteadOfWrapping() {
        Deadline forever = Deadline.after(Duration.ofSeconds(Long.MAX_VALUE));
        assertFalse(forever.isOver());
        assertTrue(forever.remainingNanos() > 0);
        assertThrows(IllegalArgumentException.class, () -> Deadline.after(Duration.ofSeconds(-1)));
    }
}
