package io.hicache.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The outcome of one suite run: its rows, the machine, the date and the command, printed as a table and
 * written as {@code <suite>.json}. Immutable.
 */
record BenchReport(String suite, List<BenchRow> rows, Map<String, Object> machine, Instant date, String command,
        int forks) {
    public BenchReport {
        rows = List.copyOf(rows);
        machine = Map.copyOf(machine);
    }

    /** A report of {@code rows} taken now on this machine, merged over {@code forks} JVMs (0: in-process). */
    public static BenchReport of(String suite, List<BenchRow> rows, String command, int forks) {
        return new BenchReport(suite, rows, Machine.describe(), Instant.now().truncatedTo(ChronoUnit.SECONDS), command,
                forks);
    }

    /** The report as JSON: suite, date, command, forks, machine and the rows. */
    public String toJson() {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("suite", suite);
        root.put("date", date.toString());
        root.put("command", command);
        root.put("forks", forks);
        root.put("machine", new LinkedHashMap<>(new java.util.TreeMap<>(machine)));
        List<Object> list = new ArrayList<>();
        for (BenchRow r : rows) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("metric", r.metric());
            row.put("value", r.value());
            row.put("unit", r.unit());
            row.put("reference", r.reference());
            row.put("reference_value", r.referenceValue());
            row.put("ratio", r.ratio());
            row.put("better", r.better());
            list.add(row);
        }
        root.put("rows", list);
        return Json.write(root);
    }

    /** Writes {@code <dir>/<suite>.json}, creating {@code dir}, and returns the file. */
    public Path write(Path dir) throws IOException {
        Files.createDirectories(dir);
        Path file = dir.resolve(suite + ".json");
        Files.writeString(file, toJson());
        return file;
    }

    /** Prints the rows as an aligned table. */
    public void print(PrintStream out) {
        int width = Math.max(6, rows.stream().mapToInt(r -> r.metric().length()).max().orElse(0));
        int refWidth = Math.max(9, rows.stream().mapToInt(r -> r.reference().length()).max().orElse(0));
        String format = "%-" + width + "s  %14s %-9s  %-" + refWidth + "s  %14s  %7s%n";
        out.printf(Locale.ROOT, format, "metric", "value", "unit", "reference", "ref value", "ratio");
        for (BenchRow r : rows) {
            out.printf(Locale.ROOT, format, r.metric(), number(r.value()), r.unit(), r.reference(),
                    number(r.referenceValue()), String.format(Locale.ROOT, "%.3f", r.ratio()));
        }
    }

    private static String number(double v) {
        return Math.abs(v) >= 1000 ? String.format(Locale.ROOT, "%,.0f", v) : String.format(Locale.ROOT, "%.3f", v);
    }
}
