package io.hicache.bench;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The outcome of one suite run: its rows, the machine, the date and the command, printed as a table and
 * written as {@code <suite>.json} (field order below; {@link BenchJson} writes and reads it). Immutable, so safe to
 * share between threads.
 */
@JsonPropertyOrder({"suite", "date", "command", "forks", "machine", "rows"})
record BenchReport(
        String suite, List<BenchRow> rows, Map<String, Object> machine, Instant date, String command, int forks) {
    public BenchReport {
        rows = List.copyOf(rows);
        machine = Map.copyOf(machine);
    }

    /** A report of {@code rows} taken now on this machine, merged over {@code forks} JVMs (0: in-process). */
    public static BenchReport of(String suite, List<BenchRow> rows, String command, int forks) {
        return new BenchReport(
                suite, rows, Machine.describe(), Instant.now().truncatedTo(ChronoUnit.SECONDS), command, forks);
    }

    /** The report as JSON (see {@link BenchJson}): suite, date, command, forks, machine and the rows. */
    public String toJson() throws IOException {
        return BenchJson.write(this);
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
        int width = Math.max(
                6, rows.stream().mapToInt(r -> r.metric().length()).max().orElse(0));
        int refWidth = Math.max(
                9, rows.stream().mapToInt(r -> r.reference().length()).max().orElse(0));
        String format = "%-" + width + "s  %14s %-9s  %-" + refWidth + "s  %14s  %7s  %s";
        out.println(String.format(
                        Locale.ROOT, format, "metric", "value", "unit", "reference", "ref value", "ratio", "rounds")
                .stripTrailing());
        for (BenchRow r : rows) {
            String spread =
                    r.ratioMin() == null ? "" : String.format(Locale.ROOT, "%.3f-%.3f", r.ratioMin(), r.ratioMax());
            out.println(String.format(
                            Locale.ROOT,
                            format,
                            r.metric(),
                            number(r.value()),
                            r.unit(),
                            r.reference(),
                            number(r.referenceValue()),
                            String.format(Locale.ROOT, "%.3f", r.ratio()),
                            spread)
                    .stripTrailing());
        }
    }

    private static String number(double v) {
        return Math.abs(v) >= 1000 ? String.format(Locale.ROOT, "%,.0f", v) : String.format(Locale.ROOT, "%.3f", v);
    }
}
