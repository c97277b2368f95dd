package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Progress: plain lines off a terminal, one redrawn line on one, never an escape code. */
class ProgressTest {
    private final ByteArrayOutputStream shown = new ByteArrayOutputStream();
    private final AtomicLong nanos = new AtomicLong();

    private Progress progress(boolean terminal) {
        return new Progress(new PrintStream(shown, true, StandardCharsets.UTF_8), terminal, nanos::get);
    }

    private String text() {
        return shown.toString(StandardCharsets.UTF_8);
    }

    @Test
    void offATerminalItPrintsPlainLinesAtMostEveryFewSeconds() {
        Progress p = progress(false);
        p.start("keys", 1, 3);
        p.round(1, 4); // same instant as the fork's line: held back
        nanos.addAndGet(6_000_000_000L);
        p.round(2, 4);
        nanos.addAndGet(1_000_000_000L);
        p.round(3, 4); // a second later: held back
        p.start("keys", 2, 3);
        p.finish();
        assertEquals(
                List.of(
                        "bench keys: fork 1 of 3",
                        "bench keys: fork 1 of 3, measurement 1, round 2 of 4",
                        "bench keys: fork 2 of 3"),
                text().lines().toList());
        assertFalse(text().contains("\r") || text().contains("\u001b"), text());
    }

    @Test
    void onATerminalItRedrawsOneLineWithABar() {
        Progress p = progress(true);
        p.start("memory", 1, 2);
        p.round(1, 2);
        p.round(2, 2);
        p.round(1, 2); // a second measurement: fork 1 counts two
        p.round(2, 2);
        p.start("memory", 2, 2);
        p.round(1, 2);
        p.round(2, 2);
        assertFalse(text().contains("\n"), "one line until the end: " + text());
        String[] frames = text().split("\r");
        String last = frames[frames.length - 1];
        // Fork 2 of 2, measurement 1 of 2 done: three quarters of the run.
        assertTrue(
                last.startsWith("[###############-----] bench memory: fork 2 of 2, measurement 1 of 2, round 2 of 2"),
                last);
        assertTrue(frames[4].contains("fork 1 of 2, measurement 2, round 1 of 2"), frames[4]);
        p.finish();
        assertTrue(text().endsWith("\n"));
        assertFalse(text().contains("\u001b"), "no ANSI escape codes: " + text());
    }

    @Test
    void anInProcessRunShowsTheRoundsOfItsMeasurement() {
        Progress p = progress(true);
        p.start("keys", 0, 0);
        p.round(1, 4);
        String[] frames = text().split("\r");
        assertTrue(
                frames[frames.length - 1].startsWith("[#####---------------] bench keys, measurement 1, round 1 of 4"),
                text());
    }

    @Test
    void measuringCodeReachesTheListenerOfItsJvm() {
        Progress p = progress(false);
        p.start("keys", 0, 0);
        Progress.reportRoundsTo(p::round);
        try {
            nanos.addAndGet(10_000_000_000L);
            Progress.roundDone(1, 3);
        } finally {
            Progress.reportRoundsTo((done, total) -> {});
        }
        nanos.addAndGet(10_000_000_000L);
        Progress.roundDone(2, 3); // nobody listens any more
        assertEquals(
                List.of("bench keys", "bench keys, measurement 1, round 1 of 3"),
                text().lines().toList());
    }
}
