package io.hicache.cli;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One reading of a daemon's metrics, from the Prometheus text its STATS request answers: each sample's value by
 * series ({@code name} or {@code name{labels}}), and sums by metric name over all label sets. Immutable.
 */
record DaemonMetrics(Map<String, Double> series, Map<String, Double> byName, long atNanos) {
    /** Reads the sample lines of {@code text} (comments and malformed lines are skipped). */
    static DaemonMetrics parse(String text, long atNanos) {
        Map<String, Double> series = new HashMap<>();
        Map<String, Double> byName = new HashMap<>();
        for (String line : text.split("\n")) {
            int space = line.lastIndexOf(' ');
            if (line.isEmpty() || line.startsWith("#") || space <= 0) {
                continue;
            }
            double value;
            try {
                value = Double.parseDouble(line.substring(space + 1));
            } catch (NumberFormatException e) {
                continue;
            }
            String key = line.substring(0, space);
            int brace = key.indexOf('{');
            series.put(key, value);
            byName.merge(brace < 0 ? key : key.substring(0, brace), value, Double::sum);
        }
        return new DaemonMetrics(Map.copyOf(series), Map.copyOf(byName), atNanos);
    }

    /**
     * Several daemons' readings as one (a cluster's): each series and each name summed, counters and gauges alike (a
     * cluster's slab is the sum of its members'); taken at the latest reading's time.
     */
    static DaemonMetrics sum(List<DaemonMetrics> readings) {
        Map<String, Double> series = new HashMap<>();
        Map<String, Double> byName = new HashMap<>();
        long at = 0;
        for (DaemonMetrics m : readings) {
            m.series.forEach((k, v) -> series.merge(k, v, Double::sum));
            m.byName.forEach((k, v) -> byName.merge(k, v, Double::sum));
            at = Math.max(at, m.atNanos);
        }
        return new DaemonMetrics(Map.copyOf(series), Map.copyOf(byName), at);
    }

    /** The sum of metric {@code name} over its label sets, or 0 if absent. */
    double sum(String name) {
        return byName.getOrDefault(name, 0.0);
    }

    /** The values of {@code name}'s series by the value of {@code label} (summed over other labels). */
    Map<String, Double> by(String name, String label) {
        Map<String, Double> out = new HashMap<>();
        String prefix = name + "{";
        String marker = label + "=\"";
        series.forEach((key, value) -> {
            int at = key.indexOf(marker);
            if (key.startsWith(prefix) && at > 0) {
                int end = key.indexOf('"', at + marker.length());
                out.merge(key.substring(at + marker.length(), end), value, Double::sum);
            }
        });
        return out;
    }
}
