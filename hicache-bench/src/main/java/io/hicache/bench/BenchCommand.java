package io.hicache.bench;

import io.hicache.cli.Args;
import io.hicache.cli.Subcommand;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.TreeMap;

/**
 * {@code hicache bench <suite>}: runs a benchmark suite, prints its table and writes its JSON, showing its progress as
 * it goes ({@link Progress}). {@code hicache bench report} draws the charts of every result ({@link BenchCharts}).
 * Stateless.
 */
public final class BenchCommand implements Subcommand {
    private static final String REPORT = "report";

    @Override
    public String name() {
        return "bench";
    }

    @Override
    public String summary() {
        return "run a benchmark suite and write bench-results/<suite>.json, or chart every result";
    }

    @Override
    public String help() {
        StringBuilder b = new StringBuilder("""
                usage: hicache bench <suite> [--out DIR] [--forks N] [--quick]
                       hicache bench report [--results DIR] [--out DIR]
                       hicache bench --list

                Runs a suite that measures HiCache's code against a reference in the same run, prints a table,
                and writes DIR/<suite>.json (DIR defaults to bench-results): rows of metric, value, unit,
                reference, reference_value, ratio, better (higher or lower) and, where the suite sets one, aim,
                with the machine, the date and the command.
                Each of N fresh JVMs (--forks, default 3) measures the suite in alternating rounds of subject
                and reference; the report gives the median over the JVMs of each figure and of each ratio.
                --quick runs a few short rounds in this JVM: enough to check the suite works, not for figures.
                Progress (suite, fork, measurement, round) goes to the output: one redrawn line on a terminal,
                plain lines otherwise.

                report reads every DIR/<suite>.json (--results, default bench-results) and draws DIR/<suite>.png
                (--out, default docs/benchmarks): each row's ratio to its reference, on a log scale around 1.

                suites:
                """);
        suites().values().forEach(s -> b.append(String.format("  %-10s %s%n", s.name(), s.description())));
        return b.toString().stripTrailing();
    }

    @Override
    public int run(List<String> args, PrintStream out, PrintStream err) throws Exception {
        Args parsed = Args.parse(args, Set.of("out", "forks", "results"), Set.of("quick", "list"), false);
        Map<String, BenchSuite> suites = suites();
        if (parsed.has("list")) {
            suites.values().forEach(s -> out.printf("%-10s %s%n", s.name(), s.description()));
            return OK;
        }
        if (parsed.positional().size() != 1) {
            throw new Args.UsageException(parsed.positional().isEmpty()
                    ? "name a suite (or report): " + String.join(", ", suites.keySet())
                    : "one suite at a time, got " + parsed.positional());
        }
        String name = parsed.positional().getFirst();
        if (name.equals(REPORT)) {
            return report(parsed, out);
        }
        if (parsed.has("results")) {
            throw new Args.UsageException("--results is an option of hicache bench report");
        }
        BenchSuite suite = suites.get(name);
        if (suite == null) {
            throw new Args.UsageException("unknown suite '" + name + "'; suites: " + String.join(", ", suites.keySet()));
        }
        Path dir = Path.of(parsed.option("out").orElse("bench-results"));
        out.println("bench " + name + ": " + suite.description() + (parsed.has("quick") ? " (quick)" : ""));
        int forks = forks(parsed);
        Progress progress = Progress.on(out);
        List<BenchRow> rows = parsed.has("quick") ? runHere(suite, progress) : Forks.run(name, false, forks, progress);
        String command = System.getProperty("hicache.launcher", "hicache") + " bench " + String.join(" ", args);
        BenchReport report = BenchReport.of(name, rows, command, parsed.has("quick") ? 0 : forks);
        report.print(out);
        Path file = report.write(dir);
        out.println("wrote " + file);
        return OK;
    }

    /** The suite in this JVM, its rounds shown on {@code progress}. */
    private static List<BenchRow> runHere(BenchSuite suite, Progress progress) throws Exception {
        progress.start(suite.name(), 0, 0);
        Progress.reportRoundsTo(progress::round);
        try {
            return suite.run(true);
        } finally {
            Progress.reportRoundsTo((done, total) -> { });
            progress.finish();
        }
    }

    private static int report(Args parsed, PrintStream out) throws Exception {
        if (parsed.has("quick") || parsed.has("forks")) {
            throw new Args.UsageException("hicache bench report takes --results DIR and --out DIR only");
        }
        Path results = Path.of(parsed.option("results").orElse("bench-results"));
        if (!Files.isDirectory(results)) {
            throw new Args.UsageException("no results folder " + results);
        }
        List<Path> charts = BenchCharts.render(results, Path.of(parsed.option("out").orElse("docs/benchmarks")), out);
        out.println(charts.size() + " charts");
        return OK;
    }

    private static int forks(Args parsed) throws Args.UsageException {
        String text = parsed.option("forks").orElse("3");
        try {
            int forks = Integer.parseInt(text);
            if (forks >= 1 && forks <= 100) {
                return forks;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new Args.UsageException("--forks takes a number from 1 to 100, got '" + text + "'");
    }

    private static Map<String, BenchSuite> suites() {
        Map<String, BenchSuite> byName = new TreeMap<>();
        ServiceLoader.load(BenchSuite.class).forEach(s -> byName.put(s.name(), s));
        return byName;
    }
}
