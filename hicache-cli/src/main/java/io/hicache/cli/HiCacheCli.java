package io.hicache.cli;

import io.hicache.core.HiCacheException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * The {@code hicache} command line, which {@code ./hicache} runs: picocli over the {@link Subcommand}s on the class
 * path. Bad arguments print what was wrong (with the closest option or command when one is near) to standard error
 * and exit with status 2; a failure exits with 1 after one line saying what went wrong ({@link UserErrors}), with the
 * stack trace only under {@code --debug}. {@code HICACHE_*} variables that nothing reads are warned about
 * ({@link EnvironmentCheck}). Each {@link #run} builds a fresh command line, so an instance is safe to share between
 * threads.
 */
public final class HiCacheCli {
    private final List<Class<? extends Subcommand>> commands;

    /** A command line over the subcommands of these classes (each built anew for every run). */
    public HiCacheCli(List<Class<? extends Subcommand>> commands) {
        this.commands = List.copyOf(commands);
    }

    /** A command line over every subcommand on the class path. */
    public static HiCacheCli fromClassPath() {
        List<Class<? extends Subcommand>> types = new ArrayList<>();
        ServiceLoader.load(Subcommand.class).stream().forEach(p -> types.add(p.type()));
        return new HiCacheCli(types);
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

    /** The command line for one run, writing to {@code out} and {@code err}. */
    public CommandLine commandLine(PrintStream out, PrintStream err) {
        CommandLine root = new CommandLine(new Root(out, err));
        for (Class<? extends Subcommand> type : commands) {
            Subcommand command;
            try {
                command = type.getConstructor().newInstance();
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot build subcommand " + type.getName(), e);
            }
            CommandLine sub = new CommandLine(command);
            command.addOptions(sub.getCommandSpec());
            root.addSubcommand(sub);
        }
        root.setUsageHelpWidth(110);
        root.setOut(new PrintWriter(out, true, StandardCharsets.UTF_8));
        root.setErr(new PrintWriter(err, true, StandardCharsets.UTF_8));
        root.setParameterExceptionHandler(HiCacheCli::badArguments);
        root.setExecutionExceptionHandler((e, line, parsed) -> {
            PrintWriter to = line.getErr();
            // One line in the user's words; the stack trace and the error code only with --debug.
            to.println(line.getCommandSpec().qualifiedName() + ": " + UserErrors.describe(e));
            if (debug(parsed)) {
                if (UserErrors.unwrap(e) instanceof HiCacheException h) {
                    to.println("error code " + h.code());
                }
                e.printStackTrace(to);
            }
            return Subcommand.FAILED;
        });
        return root;
    }

    /** Whether {@code --debug} was given, on the command or above it. */
    private static boolean debug(ParseResult parsed) {
        for (ParseResult p = parsed; p != null; p = p.subcommand()) {
            if (p.hasMatchedOption("--debug")) {
                return true;
            }
        }
        return false;
    }

    /**
     * The standard output of the run {@code spec} belongs to, as a stream, for commands that hand it to code printing
     * to streams (the bench reports); {@code spec.commandLine().getOut()} is the same output as a writer.
     */
    public static PrintStream out(CommandSpec spec) {
        spec.commandLine().getOut().flush();
        return ((Root) spec.root().userObject()).out;
    }

    /** Runs one command line and returns its exit status. */
    public int run(List<String> args, PrintStream out, PrintStream err) {
        return run(args, out, err, System.getenv());
    }

    /** As {@link #run(List, PrintStream, PrintStream)}, with {@code env} as the environment to check. */
    public int run(List<String> args, PrintStream out, PrintStream err, Map<String, String> env) {
        CommandLine line = commandLine(out, err);
        for (String warning : EnvironmentCheck.warnings(env, line)) {
            line.getErr().println("hicache: " + warning);
        }
        line.getErr().flush();
        return line.execute(args.toArray(String[]::new));
    }

    /** What was wrong, the nearest option or command if one is near, and where the help is; no full usage dump. */
    private static int badArguments(ParameterException e, String[] args) {
        CommandLine line = e.getCommandLine();
        PrintWriter err = line.getErr();
        // A mistyped option is what went wrong even when picocli first notices a required option missing
        // (`conformance --stor memory` says --store is missing): name it, and the option meant.
        String unknown = Nearest.unknownOption(line, args);
        if (unknown != null && !(e instanceof UnmatchedArgumentException)) {
            err.println(line.getCommandSpec().qualifiedName() + ": unknown option '" + unknown + "'");
            String near = Nearest.nearest(
                    unknown, List.copyOf(line.getCommandSpec().optionsMap().keySet()));
            if (near != null) {
                err.println("did you mean " + near + "?");
            }
            err.println("see '" + line.getCommandSpec().qualifiedName() + " --help'");
            return Subcommand.USAGE;
        }
        boolean unknownCommand = e instanceof UnmatchedArgumentException u
                && line.getCommandSpec().parent() == null
                && !u.getUnmatched().isEmpty()
                && !u.getUnmatched().getFirst().startsWith("-");
        err.println(line.getCommandSpec().qualifiedName() + ": "
                + (unknownCommand
                        ? "unknown command '"
                                + ((UnmatchedArgumentException) e)
                                        .getUnmatched()
                                        .getFirst() + "'"
                        : e.getMessage()));
        String nearest = e instanceof UnmatchedArgumentException u ? Nearest.suggest(u) : null;
        if (nearest != null) {
            err.println("did you mean " + nearest + "?");
        }
        err.println("see '" + line.getCommandSpec().qualifiedName() + " --help'");
        return Subcommand.USAGE;
    }

    /** The top level: no command given prints the overview to standard error. */
    @Command(
            name = "hicache",
            mixinStandardHelpOptions = true,
            versionProvider = VersionCommand.Lines.class,
            synopsisSubcommandLabel = "COMMAND",
            subcommands = CommandLine.HelpCommand.class,
            description = "HiCache: hierarchical KV-cache storage for LLM serving.",
            footer = "%nRun 'hicache COMMAND --help' for a command's options.")
    static final class Root implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Option(
                names = "--debug",
                scope = ScopeType.INHERIT,
                description = "on a failure, print the stack trace and the error code as well")
        boolean debug;

        final PrintStream out;
        final PrintStream err;

        Root(PrintStream out, PrintStream err) {
            this.out = out;
            this.err = err;
        }

        @Override
        public Integer call() {
            spec.commandLine().usage(spec.commandLine().getErr());
            return Subcommand.USAGE;
        }
    }
}
