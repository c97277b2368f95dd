package io.hicache.bench;

import io.hicache.cli.HiCacheCli;
import io.hicache.cli.Subcommand;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code hicache bench <suite>}: runs a benchmark suite, prints its table and writes its JSON, showing its progress as
 * it goes ({@link Progress}). {@code hicache bench report} draws the charts of every result ({@link BenchCharts}).
 * Runs once.
 */
@Command(
        name = "bench",
        header = "run a benchmark suite and write bench-results/<suite>.json, or chart every result",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        customSynopsis = {
            "hicache bench SUITE [--out=DIR] [--forks=N] [--quick]",
            "hicache bench report [--results=DIR] [--out=DIR]",
            "hicache bench --list"
        },
        description = {
            "Runs a suite that measures HiCache's code against a reference in the same run, prints a table, "
                    + "and writes DIR/<suite>.json (DIR defaults to bench-results): rows of metric, value, unit, reference, "
                    + "reference_value, ratio, better (higher or lower) and, where the suite sets one, aim, with the "
                    + "machine, the date and the command. Each of N fresh JVMs (--forks) measures the suite in alternating "
                    + "rounds of subject and reference; the report gives the median over the JVMs of each figure and of "
                    + "each ratio. --quick runs a few short rounds in this JVM: enough to check the suite works, not for "
                    + "figures. Progress (suite, fork, measurement, round) goes to the output: one redrawn line on a "
                    + "terminal, plain lines otherwise.",
            "",
            "report reads every DIR/<suite>.json (--results) and draws DIR/<suite>.png (--out, default "
                    + "docs/benchmarks): each row's ratio to its reference, on a log scale around 1.",
            "",
            "Suites: run 'hicache bench --list'."
        })
public final class BenchCommand implements Subcommand {
    private static final String REPORT = "report";

    @Spec
    CommandSpec spec;

    @Parameters(
            arity = "0..1",
            paramLabel = "SUITE",
            completionCandidates = SuiteNames.class,
            description = "the suite to run, or report")
    @Nullable
    String name;

    @Option(
            names = "--out",
            paramLabel = "DIR",
            description = "where results go (default bench-results; for report, " + "docs/benchmarks)")
    @Nullable
    Path out;

    @Option(
            names = "--forks",
            paramLabel = "N",
            defaultValue = "3",
            description = "fresh JVMs to measure in, 1 to 100 " + "(default ${DEFAULT-VALUE})")
    int forks;

    @Option(names = "--quick", description = "a few short rounds in this JVM: checks the suite works")
    boolean quick;

    @Option(
            names = "--results",
            paramLabel = "DIR",
            description = "report: the results to chart (default bench-results)")
    @Nullable
    Path results;

    @Option(names = "--list", description = "list the suites")
    boolean list;

    @Option(
            names = "--trace",
            paramLabel = "FILE",
            description = "trace: replay this trace (Mooncake's JSON lines, plain or .xz) instead of the conversation "
                    + "trace shipped with the testkit")
    @Nullable
    Path trace;

    @Override
    public Integer call() throws Exception {
        PrintStream print = HiCacheCli.out(spec);
        if (trace != null) {
            if (!Files.isRegularFile(trace)) {
                throw usage("--trace " + trace + ": no such file");
            }
            System.setProperty(TraceSuite.TRACE_PROPERTY, trace.toAbsolutePath().toString()); // the forks get it too
        }
        Map<String, BenchSuite> suites = suites();
        if (list) {
            suites.values().forEach(s -> print.printf("%-10s %s%n", s.name(), s.description()));
            return OK;
        }
        if (name == null) {
            throw usage("name a suite (or report): " + String.join(", ", suites.keySet()));
        }
        if (name.equals(REPORT)) {
            if (quick || spec.commandLine().getParseResult().hasMatchedOption("--forks")) {
                throw usage("hicache bench report takes --results DIR and --out DIR only");
            }
            return report(print);
        }
        if (results != null) {
            throw usage("--results is an option of hicache bench report");
        }
        BenchSuite suite = suites.get(name);
        if (suite == null) {
            throw usage("unknown suite '" + name + "'; suites: " + String.join(", ", suites.keySet()));
        }
        if (forks < 1 || forks > 100) {
            throw usage("--forks takes a number from 1 to 100, got " + forks);
        }
        Path dir = out == null ? Path.of("bench-results") : out;
        print.println("bench " + name + ": " + suite.description() + (quick ? " (quick)" : ""));
        Progress progress = Progress.on(print);
        List<BenchRow> rows = quick ? runHere(suite, progress) : Forks.run(name, false, forks, progress);
        List<String> args = new ArrayList<>(spec.commandLine().getParseResult().originalArgs());
        String command = System.getProperty("hicache.launcher", "hicache") + " " + String.join(" ", args);
        BenchReport report = BenchReport.of(name, rows, command, quick ? 0 : forks);
        report.print(print);
        Path file = report.write(dir);
        print.println("wrote " + file);
        return OK;
    }

    private ParameterException usage(String message) {
        return new ParameterException(spec.commandLine(), message);
    }

    /** The suite in this JVM, its rounds shown on {@code progress}. */
    private static List<BenchRow> runHere(BenchSuite suite, Progress progress) throws Exception {
        progress.start(suite.name(), 0, 0);
        Progress.reportRoundsTo(progress::round);
        try {
            return suite.run(true);
        } finally {
            Progress.reportRoundsTo((done, total) -> {});
            progress.finish();
        }
    }

    private int report(PrintStream print) throws Exception {
        Path from = results == null ? Path.of("bench-results") : results;
        if (!Files.isDirectory(from)) {
            throw usage("no results folder " + from);
        }
        List<Path> charts = BenchCharts.render(from, out == null ? Path.of("docs/benchmarks") : out, print);
        print.println(charts.size() + " charts");
        return OK;
    }

    private static Map<String, BenchSuite> suites() {
        Map<String, BenchSuite> byName = new TreeMap<>();
        ServiceLoader.load(BenchSuite.class).forEach(s -> byName.put(s.name(), s));
        return byName;
    }

    /** The suites on the class path and {@code report}, for shell completion. */
    static final class SuiteNames implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            List<String> names = new ArrayList<>(suites().keySet());
            names.add(REPORT);
            return names.iterator();
        }
    }
}
