package io.hicache.bench;

/**
 * Measures a subject against its reference in alternating rounds (subject, reference, reference, subject, ...)
 * so that drift on a noisy machine hits both alike, and reports the medians. Not thread-safe.
 */
public final class Comparison {
    /** A unit of work to time: runs once and returns how many items (pages, bytes) it processed. */
    @FunctionalInterface
    public interface Workload {
        long run() throws Exception;
    }

    /**
     * Medians over the measured rounds.
     *
     * @param subjectPerSecond   the subject's items per second
     * @param referencePerSecond the reference's items per second
     * @param ratio              the median of the per-round ratios subject / reference
     */
    public record Result(double subjectPerSecond, double referencePerSecond, double ratio) {}

    private final int warmupRounds;
    private final int rounds;
    private final long roundNanos;
    private final long minItemsPerRound;
    private final boolean warmReference;

    Comparison(int warmupRounds, int rounds, long roundNanos) {
        this(warmupRounds, rounds, roundNanos, 0, true);
    }

    private Comparison(int warmupRounds, int rounds, long roundNanos, long minItemsPerRound, boolean warmReference) {
        this.warmupRounds = warmupRounds;
        this.rounds = rounds;
        this.roundNanos = roundNanos;
        this.minItemsPerRound = minItemsPerRound;
        this.warmReference = warmReference;
    }

    /**
     * This comparison with every round lasting until it has also processed {@code items} (bytes, pages): for
     * suites that must move a set amount, such as enough bytes that a cache cannot hold them.
     */
    Comparison withMinItemsPerRound(long items) {
        return new Comparison(warmupRounds, rounds, roundNanos, items, warmReference);
    }

    /**
     * This comparison with warm-up rounds for the subject only: for a reference that waits far more than it computes
     * (a loop of requests to a distant server), whose warm-up would cost seconds and change nothing.
     */
    Comparison withoutReferenceWarmup() {
        return new Comparison(warmupRounds, rounds, roundNanos, minItemsPerRound, false);
    }

    /** The settings for a full run, or for a quick one that only checks a suite works. */
    static Comparison forRun(boolean quick) {
        return forRun(quick, 4, 8, 250);
    }

    /** Settings with {@code warmup} and {@code rounds} rounds of {@code roundMillis} each, or a quick run. */
    public static Comparison forRun(boolean quick, int warmup, int rounds, long roundMillis) {
        return quick ? new Comparison(1, 3, 20_000_000L) : new Comparison(warmup, rounds, roundMillis * 1_000_000L);
    }

    public Result measure(Workload subject, Workload reference) throws Exception {
        int total = warmupRounds + rounds;
        for (int i = 0; i < warmupRounds; i++) {
            rate(subject);
            if (warmReference) {
                rate(reference);
            }
            Progress.roundDone(i + 1, total);
        }
        double[] s = new double[rounds];
        double[] r = new double[rounds];
        double[] ratios = new double[rounds];
        for (int i = 0; i < rounds; i++) {
            if (i % 2 == 0) {
                s[i] = rate(subject);
                r[i] = rate(reference);
            } else {
                r[i] = rate(reference);
                s[i] = rate(subject);
            }
            ratios[i] = s[i] / r[i];
            Progress.roundDone(warmupRounds + i + 1, total);
        }
        return new Result(Forks.median(s), Forks.median(r), Forks.median(ratios));
    }

    private double rate(Workload w) throws Exception {
        long items = 0;
        long start = System.nanoTime();
        long elapsed;
        do {
            items += w.run();
            elapsed = System.nanoTime() - start;
        } while (elapsed < roundNanos || items < minItemsPerRound);
        return items * 1e9 / elapsed;
    }
}
