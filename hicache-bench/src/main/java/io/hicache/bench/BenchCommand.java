package io.hicache.bench;

import io.hicache.cli.Args;
import io.hicache.cli.Subcommand;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.TreeMap;

/** {@code hicache bench <suite>}: runs a benchmark suite, prints its table and writes its JSON. Stateless. */
public final class BenchCommand implements Subcommand {
    @Override
    public String name() {
        return "bench";
    }

    @Override
    public String summary() {
        return "run a benchmark suite and write bench-results/<suite>.json";
    }

    @Override
    public String help() {
        StringBuilder b = new StringBuilder("""
                usage: hicache bench <suite> [--out DIR] [--forks N] [--quick]
                       hicache bench --list

                Runs a suite that measures HiCache's code against a reference in the same run, prints a table,
                and writes DIR/<suite>.json (DIR defaults to bench-results): rows of metric, value, unit,
                reference, reference_value and ratio, with the machine, the date and the command.
                Each of N fresh JVMs (--forks, default 3) measures the suite in alternating rounds of subject
                and reference; the report gives the median over the JVMs of each figure and of each ratio.
                --quick runs a few short rounds in this JVM: enough to check the suite works, not for figures.

                suites:
                """);
        suites().values().forEach(s -> b.append(String.format("  %-10s %s%n", s.name(), s.description())));
        return b.toString().stripTrailing();
    }

    @Override
    public int run(List<String> args, PrintStream out, PrintStream err) throws Exception {
        Args parsed = Args.parse(args, Set.of("out", "forks"), Set.of("quick", "list"), false);
        Map<String, BenchSuite> suites = suites();
        if (parsed.has("list")) {
            suites.values().forEach(s -> out.printf("%-10s %s%n", s.name(), s.description()));
            return OK;
        }
        if (parsed.positional().size() != 1) {
            throw new Args.UsageException(parsed.positional().isEmpty() ? "name a suite: " + String.join(", ", suites.keySet())
                    : "one suite at a time, got " + parsed.positional());
        }
        String name = parsed.positional().getFirst();
        BenchSuite suite = suites.get(name);
        if (suite == null) {
            throw new Args.UsageException("unknown suite '" + name + "'; suites: " + String.join(", ", suites.keySet()));
        }
        Path dir = Path.of(parsed.option("out").orElse("bench-results"));
        out.println("bench " + name + ": " + suite.description() + (parsed.has("quick") ? " (quick)" : ""));
        int forks = forks(parsed);
        List<BenchRow> rows = parsed.has("quick") ? suite.run(true) : Forks.run(name, false, forks);
        String command = System.getProperty("hicache.launcher", "hicache") + " bench " + String.join(" ", args);
        BenchReport report = BenchReport.of(name, rows, command, parsed.has("quick") ? 0 : forks);
        report.print(out);
        Path file = report.write(dir);
        out.println("wrote " + file);
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
