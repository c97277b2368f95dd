package io.hicache.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.ServiceLoader;
import org.jspecify.annotations.Nullable;

/**
 * Runs a suite in fresh JVMs, one after another, and merges their rows by median. JIT compilation differs from
 * one JVM to the next, and with it a workload's speed; one JVM can make a reference look 40% faster than the
 * next one does (seen with {@code keys} at page size 1). Forks sample that variance instead of betting on one
 * draw. Each fork still measures subject and reference in alternating rounds. Stateless; the forks of one call
 * run one after another, never together, so they do not compete for the cores.
 */
final class Forks {
    private static final String ROW_PREFIX = "@row\t";
    private static final String ROUND_PREFIX = "@round\t";

    private Forks() {}

    /**
     * Runs {@code suite} in {@code forks} child JVMs with this JVM's runtime, flags and class path, showing on
     * {@code progress} which fork runs and the rounds it reports.
     */
    static List<BenchRow> run(String suite, boolean quick, int forks, Progress progress)
            throws IOException, InterruptedException {
        List<List<BenchRow>> runs = new ArrayList<>();
        try {
            for (int f = 0; f < forks; f++) {
                progress.start(suite, f + 1, forks);
                runs.add(runChild(suite, quick, progress));
            }
        } finally {
            progress.finish();
        }
        return median(runs);
    }

    private static List<BenchRow> runChild(String suite, boolean quick, Progress progress)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current()
                .info()
                .command()
                .orElseThrow(() -> new IOException("cannot tell which java runs this process")));
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        String trace = System.getProperty(TraceSuite.TRACE_PROPERTY);
        if (trace != null) {
            command.add("-D" + TraceSuite.TRACE_PROPERTY + "=" + trace);
        }
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), Forks.class.getName(), suite));
        if (quick) {
            command.add("--quick");
        }
        Process child = new ProcessBuilder(command)
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        List<BenchRow> rows = new ArrayList<>();
        try (BufferedReader out =
                new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = out.readLine()) != null) {
                if (line.startsWith(ROW_PREFIX)) {
                    rows.add(parse(line.substring(ROW_PREFIX.length())));
                } else if (line.startsWith(ROUND_PREFIX)) {
                    String[] f = line.substring(ROUND_PREFIX.length()).split("\t", -1);
                    progress.round(Integer.parseInt(f[0]), Integer.parseInt(f[1]));
                }
            }
        }
        int status = child.waitFor();
        if (status != 0) {
            throw new IOException("bench fork of suite " + suite + " exited with status " + status);
        }
        return rows;
    }

    /**
     * Per metric: the median value, reference value and ratio over the runs; where the runs report a spread, the lowest
     * and highest round of all of them.
     */
    static List<BenchRow> median(List<List<BenchRow>> runs) {
        Map<String, List<BenchRow>> byMetric = new LinkedHashMap<>();
        for (List<BenchRow> run : runs) {
            for (BenchRow row : run) {
                byMetric.computeIfAbsent(row.metric(), m -> new ArrayList<>()).add(row);
            }
        }
        List<BenchRow> merged = new ArrayList<>();
        byMetric.forEach((metric, rows) -> {
            BenchRow first = rows.getFirst();
            merged.add(new BenchRow(
                    metric,
                    median(rows.stream().mapToDouble(BenchRow::value).toArray()),
                    first.unit(),
                    first.reference(),
                    median(rows.stream().mapToDouble(BenchRow::referenceValue).toArray()),
                    median(rows.stream().mapToDouble(BenchRow::ratio).toArray()),
                    first.better(),
                    first.aim(),
                    rows.stream()
                            .map(BenchRow::ratioMin)
                            .filter(Objects::nonNull)
                            .min(Double::compare)
                            .orElse(null),
                    rows.stream()
                            .map(BenchRow::ratioMax)
                            .filter(Objects::nonNull)
                            .max(Double::compare)
                            .orElse(null)));
        });
        return merged;
    }

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    /** A row as one tab-separated line, as a fork prints it for its parent. */
    static String format(BenchRow r) {
        return String.join(
                "\t",
                r.metric(),
                Double.toString(r.value()),
                r.unit(),
                r.reference(),
                Double.toString(r.referenceValue()),
                Double.toString(r.ratio()),
                r.better(),
                orEmpty(r.aim()),
                orEmpty(r.ratioMin()),
                orEmpty(r.ratioMax()));
    }

    private static String orEmpty(@Nullable Double d) {
        return d == null ? "" : Double.toString(d);
    }

    private static @Nullable Double orNull(String s) {
        return s.isEmpty() ? null : Double.valueOf(s);
    }

    /** The row of a line {@link #format} wrote. */
    static BenchRow parse(String line) {
        String[] f = line.split("\t", -1);
        return new BenchRow(
                f[0],
                Double.parseDouble(f[1]),
                f[2],
                f[3],
                Double.parseDouble(f[4]),
                Double.parseDouble(f[5]),
                f[6],
                orNull(f[7]),
                orNull(f[8]),
                orNull(f[9]));
    }

    /** The child side: runs one suite and prints its rows for the parent. */
    public static void main(String[] args) throws Exception {
        boolean quick = Arrays.asList(args).contains("--quick");
        Progress.reportRoundsTo((done, total) -> System.out.println(ROUND_PREFIX + done + "\t" + total));
        for (BenchSuite suite : ServiceLoader.load(BenchSuite.class)) {
            if (suite.name().equals(args[0])) {
                for (BenchRow row : suite.run(quick)) {
                    System.out.println(ROW_PREFIX + format(row));
                }
                System.out.flush();
                return;
            }
        }
        throw new IllegalArgumentException("no bench suite named " + args[0]);
    }
}
