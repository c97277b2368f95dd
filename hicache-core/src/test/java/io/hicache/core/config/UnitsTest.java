package io.hicache.core.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class UnitsTest {
    @Test
    void bytesInBinaryAndDecimalUnits() {
        assertEquals(4096, Units.parseBytes("4096"));
        assertEquals(64L << 20, Units.parseBytes("64MiB"));
        assertEquals(64L << 20, Units.parseBytes("64m"));
        assertEquals(2_000_000_000L, Units.parseBytes("2GB"));
        assertEquals(3L << 29, Units.parseBytes("1.5 GiB"));
        assertEquals(1L << 40, Units.parseBytes("1TiB"));
        assertEquals(1L << 50, Units.parseBytes("1PiB")); // it was "unknown size unit" (issue 37)
        assertEquals(2_000_000_000_000_000L, Units.parseBytes("2PB"));
        assertEquals(0, Units.parseBytes("0"));
    }

    @Test
    void badSizesSayWhatIsWrong() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Units.parseBytes("12 parsecs"))
                .getMessage()
                .contains("unknown size unit 'parsecs'"));
        assertThrows(IllegalArgumentException.class, () -> Units.parseBytes("-1"));
        assertThrows(IllegalArgumentException.class, () -> Units.parseBytes("lots"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Units.parseBytes("99999999999TiB"))
                .getMessage()
                .contains("too large"));
    }

    @Test
    void durations() {
        assertEquals(Duration.ofMillis(250), Units.parseDuration("250ms"));
        assertEquals(Duration.ofSeconds(2), Units.parseDuration("2s"));
        assertEquals(Duration.ofSeconds(90), Units.parseDuration("1.5m"));
        assertEquals(Duration.ofHours(1), Units.parseDuration("1h"));
        assertEquals(Duration.ofNanos(1500), Units.parseDuration("1.5us"));
        assertEquals(Duration.ofSeconds(3), Units.parseDuration("PT3S"));
        assertThrows(IllegalArgumentException.class, () -> Units.parseDuration("10"));
        assertThrows(IllegalArgumentException.class, () -> Units.parseDuration("10 fortnights"));
        assertThrows(IllegalArgumentException.class, () -> Units.parseDuration("PTx"));
    }

    @Test
    void formatsReadably() {
        assertEquals("512 B", Units.formatBytes(512));
        assertEquals("64 MiB", Units.formatBytes(64L << 20));
        assertEquals("1.50 GiB", Units.formatBytes(3L << 29));
        for (long size : new long[] {512, 64L << 20, 3L << 29, 1L << 40, 1L << 50}) {
            assertEquals(size, Units.parseBytes(Units.formatBytes(size)), "a printed size reads back");
        }
    }
}
