package io.hicache.testkit;

import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * What a conformance run found: one line per case, with its outcome and, for failures and skips, why.
 * Immutable.
 *
 * @param target what was tested ({@code store 'file' at /data/hicache})
 * @param cases  the cases in the order they ran
 */
public record ConformanceReport(String target, List<Case> cases) {
    /** How a case ended. */
    public enum Outcome {
        PASSED,
        FAILED,
        SKIPPED
    }

    /**
     * One case.
     *
     * @param name    the test method, and the parameter for parameterized cases
     * @param outcome how it ended
     * @param detail  why it failed or was skipped; empty when it passed
     * @param elapsed how long it ran
     */
    public record Case(String name, Outcome outcome, String detail, Duration elapsed) {}

    public ConformanceReport {
        cases = List.copyOf(cases);
    }

    public long count(Outcome outcome) {
        return cases.stream().filter(c -> c.outcome() == outcome).count();
    }

    /** The cases that ended with {@code outcome}. */
    public List<Case> cases(Outcome outcome) {
        return cases.stream().filter(c -> c.outcome() == outcome).toList();
    }

    /** True when no case failed and at least one ran. */
    public boolean passed() {
        return count(Outcome.FAILED) == 0 && count(Outcome.PASSED) > 0;
    }

    /** Prints a table of the cases, then a summary line. */
    public void print(PrintStream out) {
        PrintWriter w = new PrintWriter(out, false, StandardCharsets.UTF_8);
        print(w);
        w.flush();
    }

    /** As {@link #print(PrintStream)}. */
    public void print(PrintWriter out) {
        int width = Math.max(
                30, cases.stream().mapToInt(c -> c.name().length()).max().orElse(0));
        out.println("conformance of " + target);
        out.printf(Locale.ROOT, "%-" + width + "s  %-7s  %8s  %s%n", "case", "result", "time", "detail");
        for (Case c : cases) {
            String detail = c.detail().lines().findFirst().orElse("");
            if (detail.length() > 160) {
                detail = detail.substring(0, 157) + "...";
            }
            out.printf(
                    Locale.ROOT,
                    "%-" + width + "s  %-7s  %6d ms  %s%n",
                    c.name(),
                    c.outcome().name().toLowerCase(Locale.ROOT),
                    c.elapsed().toMillis(),
                    detail);
        }
        out.printf(
                Locale.ROOT,
                "%d passed, %d failed, %d skipped%n",
                count(Outcome.PASSED),
                count(Outcome.FAILED),
                count(Outcome.SKIPPED));
    }
}
