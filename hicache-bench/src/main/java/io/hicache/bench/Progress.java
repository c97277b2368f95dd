package io.hicache.bench;

import java.io.PrintStream;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * Progress of a bench run, so that a run of minutes says where it is: which suite, which fork of how many, which
 * measurement and which round of how many. On a terminal it is one line redrawn with {@code \r}: a bar of the share
 * done (forks done, and this fork's measurements once an earlier fork has counted them; in-process, the rounds of
 * the current measurement), then the words. Elsewhere (a pipe, a log file, CI) plain lines, at most one every few
 * seconds besides the start of each fork, and never a control character but the newline. No ANSI escape codes in
 * either mode.
 *
 * <p>Measuring code reports each finished round with the static {@link #roundDone}; where that goes is this JVM's
 * choice ({@link #reportRoundsTo}): to a display in the JVM that runs the suite in-process, to the parent as
 * {@code @round} lines from a fork ({@link Forks}), nowhere by default.
 *
 * <p>Thread-safe: a display's methods are synchronized; the JVM's round listener is a volatile field.
 */
public final class Progress {
    /** Receives finished rounds: {@code done} of {@code total} in the current measurement. */
    @FunctionalInterface
    interface Rounds {
        void roundDone(int done, int total);
    }

    private static final int BAR_WIDTH = 20;
    private static final long LINE_INTERVAL_NANOS = 5_000_000_000L;
    private static volatile Rounds listener = (done, total) -> {};

    private final PrintStream out;
    private final boolean terminal;
    private final LongSupplier clock;
    private String suite = "";
    private int fork;
    private int forks;
    private int measurement;
    private int measurementsPerFork;
    private double share;
    private String lastLine = "";
    private long lastLineNanos;
    private boolean printed;
    private boolean drawn;

    Progress(PrintStream out, boolean terminal, LongSupplier clock) {
        this.out = out;
        this.terminal = terminal;
        this.clock = clock;
    }

    /** A display on {@code out}: a redrawn bar when {@code out} is this process's standard output on a terminal. */
    static Progress on(PrintStream out) {
        return new Progress(out, out == System.out && io.hicache.cli.Progress.isTerminal(), System::nanoTime);
    }

    /** Sends the rounds this JVM's measuring code finishes to {@code rounds}. */
    static void reportRoundsTo(Rounds rounds) {
        listener = rounds;
    }

    /** Measuring code: round {@code done} of {@code total} (warm-up rounds included) has finished. */
    public static void roundDone(int done, int total) {
        listener.roundDone(done, total);
    }

    /** Fork {@code fork} (from 1) of {@code forks} of {@code suite} starts; {@code forks} 0: the run is in-process. */
    synchronized void start(String suite, int fork, int forks) {
        if (this.fork > 0 && measurement > 0) {
            measurementsPerFork = Math.max(measurementsPerFork, measurement);
        }
        this.suite = suite;
        this.fork = fork;
        this.forks = forks;
        this.measurement = 0;
        this.share = forks == 0 ? 0 : (fork - 1) / (double) forks;
        show(describe(0, 0), true);
    }

    /** Round {@code done} of {@code total} has finished; round 1 starts a new measurement. */
    synchronized void round(int done, int total) {
        if (done == 1 || measurement == 0) {
            measurement++;
        }
        if (forks == 0) {
            share = done / (double) total;
        } else if (measurementsPerFork > 0) {
            double inFork = Math.min(1, (measurement - 1 + done / (double) total) / measurementsPerFork);
            share = (fork - 1 + inFork) / forks;
        }
        show(describe(done, total), false);
    }

    /** Ends the display: on a terminal, the redrawn line is closed with a newline. */
    synchronized void finish() {
        if (terminal && drawn) {
            out.println();
            out.flush();
        }
        drawn = false;
    }

    private String describe(int done, int total) {
        StringBuilder text = new StringBuilder("bench ").append(suite);
        if (forks > 0) {
            text.append(String.format(Locale.ROOT, ": fork %d of %d", fork, forks));
        }
        if (measurement > 0) {
            text.append(String.format(
                    Locale.ROOT,
                    ", measurement %d%s, round %d of %d",
                    measurement,
                    measurementsPerFork > 0 ? " of " + measurementsPerFork : "",
                    done,
                    total));
        }
        return text.toString();
    }

    private void show(String text, boolean always) {
        if (terminal) {
            String line = bar(share) + " " + text;
            out.print("\r" + line + " ".repeat(Math.max(0, lastLine.length() - line.length())));
            out.flush();
            lastLine = line;
            drawn = true;
            return;
        }
        long now = clock.getAsLong();
        if (always || !printed || now - lastLineNanos >= LINE_INTERVAL_NANOS) {
            out.println(text);
            out.flush();
            lastLineNanos = now;
            printed = true;
        }
    }

    private static String bar(double share) {
        int filled = (int) Math.round(Math.min(1, share) * BAR_WIDTH);
        return "[" + "#".repeat(filled) + "-".repeat(BAR_WIDTH - filled) + "]";
    }
}
