package io.hicache.cli;

import io.hicache.core.HiCacheException;
import io.hicache.core.HiCacheVersion;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;

/**
 * The {@code hicache} command line, which {@code ./hicache} runs. It dispatches to the {@link Subcommand}s on
 * the class path; bad arguments print usage to standard error and exit with status 2. Immutable once built.
 */
public final class HiCacheCli {
    private final Map<String, Subcommand> commands;

    /** A command line over the given subcommands. */
    public HiCacheCli(List<Subcommand> subcommands) {
        Map<String, Subcommand> byName = new TreeMap<>();
        for (Subcommand c : subcommands) {
            if (byName.putIfAbsent(c.name(), c) != null) {
                throw new IllegalStateException("two subcommands are named '" + c.name() + "'");
            }
        }
        this.commands = byName;
    }

    /** A command line over every subcommand on the class path. */
    public static HiCacheCli fromClassPath() {
        return new HiCacheCli(ServiceLoader.load(Subcommand.class).stream().map(ServiceLoader.Provider::get).toList());
    }

    public static void main(String[] args) {
        // One line per log record, unless the user configured JDK logging otherwise.
        if (System.getProperty("java.util.logging.SimpleFormatter.format") == null
                && System.getProperty("java.util.logging.config.file") == null) {
            System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tF %1$tT %4$s %3$s: %5$s%6$s%n");
        }
        int status = fromClassPath().run(List.of(args), System.out, System.err);
        System.out.flush();
        System.exit(status);
    }

    /** Runs one command line and returns its exit status. */
    public int run(List<String> args, PrintStream out, PrintStream err) {
        if (args.isEmpty()) {
            usage(err);
            return Subcommand.USAGE;
        }
        String first = args.getFirst();
        if (first.equals("--help") || first.equals("-h") || first.equals("help")) {
            if (args.size() > 1 && commands.containsKey(args.get(1))) {
                out.println(commands.get(args.get(1)).help());
            } else {
                usage(out);
            }
            return Subcommand.OK;
        }
        if (first.equals("--version")) {
            first = "version";
        }
        Subcommand command = commands.get(first);
        if (command == null) {
            err.println("hicache: unknown command '" + first + "'");
            usage(err);
            return Subcommand.USAGE;
        }
        List<String> rest = args.subList(1, args.size());
        if (rest.contains("--help") || rest.contains("-h")) {
            out.println(command.help());
            return Subcommand.OK;
        }
        try {
            return command.run(rest, out, err);
        } catch (Args.UsageException e) {
            err.println("hicache " + command.name() + ": " + e.getMessage());
            err.println();
            err.println(command.help());
            return Subcommand.USAGE;
        } catch (HiCacheException e) {
            err.println("hicache " + command.name() + ": " + e.getMessage() + " [" + e.code() + "]");
            return Subcommand.FAILED;
        } catch (Exception e) {
            err.println("hicache " + command.name() + ": " + e);
            e.printStackTrace(err);
            return Subcommand.FAILED;
        }
    }

    private void usage(PrintStream to) {
        to.println("HiCache " + HiCacheVersion.version() + ": hierarchical KV-cache storage for LLM serving");
        to.println();
        to.println("usage: hicache <command> [options]      hicache <command> --help for a command's options");
        to.println();
        to.println("commands:");
        int width = commands.keySet().stream().mapToInt(String::length).max().orElse(8);
        commands.values().forEach(c -> to.printf("  %-" + width + "s  %s%n", c.name(), c.summary()));
    }
}
