package io.hicache.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * The ticks of a log-scale ratio axis: round ratios (1, 2, 5, then 3, 4, 6, 8, then 1.5, ... down to 1.1), kept at
 * least {@link #MIN_GAP_PIXELS} apart, so that a narrow range (0.85 to 1.2) gets 0.9, 1, 1.1 and a wide
 * one (0.02 to 500) gets 0.1, 1, 10, 100 with their 2s and 5s. Stateless.
 */
final class RatioTicks {
    static final int MIN_GAP_PIXELS = 40;
    /** Levels whose ticks are taken one by one where there is room; a finer level is taken whole or not at all. */
    private static final int GREEDY_LEVELS = 3;

    /** Mantissas each level adds to the ones before it, roundest first. */
    private static final double[][] LEVELS = {
        {1},
        {2, 5},
        {3, 4, 6, 8},
        {1.5, 2.5, 7, 9},
        {1.2, 1.4, 1.6, 1.8, 3.5, 4.5},
        {1.1, 1.3, 1.7, 1.9, 2.2, 2.4, 2.6, 2.8}
    };

    private RatioTicks() {}

    /**
     * The ticks within {@code [low, high]} (ratios, {@code 0 < low < 1 < high}) for an axis of {@code pixels}: level by
     * level, roundest first, the ticks that stand at least {@link #MIN_GAP_PIXELS} from every tick taken before them;
     * past 1, 2, 5 and 3, 4, 6, 8 a level is taken only if all its ticks fit (else 15 and 26 would appear where 10 and
     * 20 leave room). 1 is always one.
     */
    static List<Double> ticks(double low, double high, double pixels) {
        double pixelsPerDecade = pixels / Math.log10(high / low);
        TreeSet<Double> chosen = new TreeSet<>(List.of(1.0));
        for (int level = 0; level < LEVELS.length; level++) {
            TreeSet<Double> taken = new TreeSet<>(chosen);
            boolean whole = true;
            for (int decade = (int) Math.floor(Math.log10(low));
                    decade <= (int) Math.ceil(Math.log10(high));
                    decade++) {
                for (double mantissa : LEVELS[level]) {
                    double v = Double.parseDouble(RatioChart.figure(mantissa * Math.pow(10, decade)));
                    if (v < low || v > high) {
                        continue;
                    }
                    if (apart(v, taken, pixelsPerDecade)) {
                        taken.add(v);
                    } else {
                        whole = false;
                    }
                }
            }
            if (level < GREEDY_LEVELS || whole) {
                chosen = taken;
            }
        }
        return new ArrayList<>(chosen);
    }

    private static boolean apart(double v, TreeSet<Double> chosen, double pixelsPerDecade) {
        Double below = chosen.floor(v);
        Double above = chosen.ceiling(v);
        return (below == null || Math.log10(v / below) * pixelsPerDecade >= MIN_GAP_PIXELS)
                && (above == null || Math.log10(above / v) * pixelsPerDecade >= MIN_GAP_PIXELS);
    }
}
