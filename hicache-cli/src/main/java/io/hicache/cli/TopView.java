package io.hicache.cli;

import io.hicache.core.config.Units;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/** What {@code stats} and {@code top} print, from readings of a daemon's metrics. Stateless. */
final class TopView {
    private TopView() {}

    /** Totals since the daemon started and its state now. */
    static List<String> totals(DaemonMetrics m) {
        List<String> out = new ArrayList<>();
        out.add(String.format(
                Locale.ROOT,
                "requests     %,.0f (%s)",
                m.sum("hicache_server_request_seconds_count"),
                perOp(m.by("hicache_server_request_seconds_count", "op"))));
        Map<String, Double> sameHost = m.by("hicache_server_same_host_bytes_total", "direction");
        out.add(String.format(
                Locale.ROOT,
                "bytes        %s received, %s sent over sockets; same host: %s read, %s written in the slab",
                Units.formatBytes((long) m.sum("hicache_server_received_bytes_total")),
                Units.formatBytes((long) m.sum("hicache_server_sent_bytes_total")),
                Units.formatBytes(sameHost.getOrDefault("read", 0.0).longValue()),
                Units.formatBytes(sameHost.getOrDefault("write", 0.0).longValue())));
        double host = m.sum("hicache_server_hits_host_total");
        double store = m.sum("hicache_server_hits_store_total");
        double miss = m.sum("hicache_server_misses_total");
        out.add(String.format(
                Locale.ROOT,
                "pages asked  %,.0f: %s from the slab, %s from L3, %s missed",
                host + store + miss,
                share(host, host + store + miss),
                share(store, host + store + miss),
                share(miss, host + store + miss)));
        out.add(state(m));
        out.add(String.format(
                Locale.ROOT,
                "write-behind %,.0f pages written, %,.0f pending, %,.0f failed tries, " + "%,.0f given up",
                m.sum("hicache_server_write_behind_pages_total"),
                m.sum("hicache_server_write_behind_pending_pages"),
                m.sum("hicache_server_write_behind_failures_total"),
                m.sum("hicache_server_write_behind_abandoned_pages_total")));
        out.add(String.format(
                Locale.ROOT,
                "evictions    %,.0f pages; %,.0f puts refused; errors: %s",
                m.sum("hicache_server_evicted_pages_total"),
                m.sum("hicache_server_rejected_puts_total"),
                nonZero(m.by("hicache_server_errors_total", "code"), 1)));
        return out;
    }

    /** Rates between two readings, and the state at the later one. */
    static List<String> rates(DaemonMetrics before, DaemonMetrics now) {
        double seconds = Math.max(1e-9, (now.atNanos() - before.atNanos()) / 1e9);
        List<String> out = new ArrayList<>();
        // Same-host clients move page bytes through the slab, not the socket: counted apart, or a daemon serving
        // only them would show next to nothing.
        Map<String, Double> hostBefore = before.by("hicache_server_same_host_bytes_total", "direction");
        Map<String, Double> hostNow = now.by("hicache_server_same_host_bytes_total", "direction");
        double read = hostNow.getOrDefault("read", 0.0) - hostBefore.getOrDefault("read", 0.0);
        double written = hostNow.getOrDefault("write", 0.0) - hostBefore.getOrDefault("write", 0.0);
        out.add(String.format(
                Locale.ROOT,
                "throughput   %s/s in, %s/s out over sockets; same host: %s/s read, %s/s written in the slab",
                Units.formatBytes((long) (delta(before, now, "hicache_server_received_bytes_total") / seconds)),
                Units.formatBytes((long) (delta(before, now, "hicache_server_sent_bytes_total") / seconds)),
                Units.formatBytes((long) (read / seconds)),
                Units.formatBytes((long) (written / seconds))));
        double host = delta(before, now, "hicache_server_hits_host_total");
        double store = delta(before, now, "hicache_server_hits_store_total");
        double miss = delta(before, now, "hicache_server_misses_total");
        double asked = host + store + miss;
        out.add(String.format(
                Locale.ROOT,
                "hit rate     %s (%s slab, %s L3) of %,.0f pages/s asked",
                asked == 0 ? "-" : share(host + store, asked),
                share(host, asked),
                share(store, asked),
                asked / seconds));
        out.add(state(now));
        out.add(String.format(
                Locale.ROOT,
                "write-behind %,.0f pages pending, %,.0f pages/s written, %,.0f failed tries/s",
                now.sum("hicache_server_write_behind_pending_pages"),
                delta(before, now, "hicache_server_write_behind_pages_total") / seconds,
                delta(before, now, "hicache_server_write_behind_failures_total") / seconds));
        out.add("");
        out.add(String.format(Locale.ROOT, "%-14s %12s %12s", "operation", "requests/s", "mean ms"));
        Map<String, Double> counts = new TreeMap<>(now.by("hicache_server_request_seconds_count", "op"));
        Map<String, Double> countsBefore = before.by("hicache_server_request_seconds_count", "op");
        Map<String, Double> sums = now.by("hicache_server_request_seconds_sum", "op");
        Map<String, Double> sumsBefore = before.by("hicache_server_request_seconds_sum", "op");
        counts.forEach((op, n) -> {
            double dn = n - countsBefore.getOrDefault(op, 0.0);
            double ds = sums.getOrDefault(op, 0.0) - sumsBefore.getOrDefault(op, 0.0);
            out.add(String.format(
                    Locale.ROOT,
                    "%-14s %12.1f %12s",
                    op,
                    dn / seconds,
                    dn == 0 ? "-" : String.format(Locale.ROOT, "%.3f", ds / dn * 1000)));
        });
        Map<String, Double> errors = new TreeMap<>();
        Map<String, Double> errorsBefore = before.by("hicache_server_errors_total", "code");
        now.by("hicache_server_errors_total", "code")
                .forEach((code, n) -> errors.put(code, (n - errorsBefore.getOrDefault(code, 0.0)) / seconds));
        out.add("errors/s     " + nonZero(errors, 0.001));
        return out;
    }

    private static String state(DaemonMetrics m) {
        double slab = m.sum("hicache_server_slab_bytes");
        double used = slab - m.sum("hicache_server_slab_free_bytes");
        return String.format(
                Locale.ROOT,
                "slab         %s of %s used (%s), %,.0f pages; %,.0f connections",
                Units.formatBytes((long) used),
                Units.formatBytes((long) slab),
                slab == 0 ? "-" : share(used, slab),
                m.sum("hicache_server_pages"),
                m.sum("hicache_server_connections"));
    }

    private static double delta(DaemonMetrics before, DaemonMetrics now, String name) {
        return Math.max(0, now.sum(name) - before.sum(name));
    }

    private static String share(double part, double whole) {
        return whole == 0 ? "0%" : String.format(Locale.ROOT, "%.1f%%", 100 * part / whole);
    }

    private static String perOp(Map<String, Double> byOp) {
        StringBuilder b = new StringBuilder();
        new TreeMap<>(byOp)
                .forEach((op, n) -> b.append(b.isEmpty() ? "" : ", ")
                        .append(op)
                        .append(' ')
                        .append(String.format(Locale.ROOT, "%,.0f", n)));
        return b.isEmpty() ? "none" : b.toString();
    }

    private static String nonZero(Map<String, Double> byCode, double atLeast) {
        StringBuilder b = new StringBuilder();
        new TreeMap<>(byCode).forEach((code, n) -> {
            if (n >= atLeast) {
                b.append(b.isEmpty() ? "" : ", ")
                        .append(code)
                        .append(' ')
                        .append(String.format(Locale.ROOT, n >= 10 ? "%,.0f" : "%.2f", n));
            }
        });
        return b.isEmpty() ? "none" : b.toString();
    }
}
