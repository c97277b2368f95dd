package io.hicache.cli;

import java.io.Console;
import java.io.PrintWriter;
import java.util.Locale;

/**
 * Progress of a long run (a conformance run, a bench suite, a shutdown drain) on standard error: on a terminal one
 * line redrawn in place with a bar when the total is known; otherwise plain lines, at most one per
 * {@code plainEveryMillis}, with no escape or carriage-return codes, for logs and CI. Not thread-safe: one run reports
 * from one thread.
 */
public final class Progress {
    private static final int BAR = 30;

    private final PrintWriter out;
    private final boolean terminal;
    private final String what;
    private final long total;
    private final long plainEveryMillis;
    private long lastPlainMillis;
    private int drawn;

    private Progress(PrintWriter out, boolean terminal, String what, long total, long plainEveryMillis) {
        this.out = out;
        this.terminal = terminal;
        this.what = what;
        this.total = total;
        this.plainEveryMillis = plainEveryMillis;
    }

    /**
     * Progress of {@code what} to {@code out}, out of {@code total} steps (0 when unknown), drawn in place when
     * standard error is a terminal.
     */
    public static Progress of(PrintWriter out, String what, long total) {
        return new Progress(out, isTerminal(), what, total, 0);
    }

    /** As {@link #of}, stating whether to draw for a terminal, and how often plain lines may come. */
    public static Progress of(PrintWriter out, boolean terminal, String what, long total, long plainEveryMillis) {
        return new Progress(out, terminal, what, total, plainEveryMillis);
    }

    /** Whether this process writes to a terminal (not a pipe, a file or a CI log). */
    public static boolean isTerminal() {
        Console console = System.console();
        return console != null && console.isTerminal();
    }

    /** Reports that {@code done} steps are done, the latest being {@code detail}. */
    public void update(long done, String detail) {
        String count = total > 0 ? done + "/" + total : Long.toString(done);
        if (terminal) {
            StringBuilder line = new StringBuilder("\r");
            if (total > 0) {
                int filled = (int) Math.min(BAR, done * BAR / total);
                line.append('[')
                        .append("#".repeat(filled))
                        .append(" ".repeat(BAR - filled))
                        .append("] ");
            }
            line.append(what).append(' ').append(count).append(": ").append(detail);
            int width = line.length();
            line.append(" ".repeat(Math.max(0, drawn - width))); // wipe what a longer line left
            drawn = width;
            out.print(line);
            out.flush();
            return;
        }
        long now = System.currentTimeMillis();
        if (plainEveryMillis == 0 || now - lastPlainMillis >= plainEveryMillis || (total > 0 && done >= total)) {
            lastPlainMillis = now;
            out.println(String.format(Locale.ROOT, "%s %s: %s", what, count, detail));
            out.flush();
        }
    }

    /** Ends the report: on a terminal, moves past the redrawn line. */
    public void finish() {
        if (terminal && drawn > 0) {
            out.println();
            out.flush();
        }
    }
}
