package io.hicache.cli;

import java.io.PrintStream;
import java.util.List;

/**
 * One subcommand of the {@code hicache} command line ({@code version}, {@code conformance}, {@code bench}, ...).
 * Subcommands are found with {@link java.util.ServiceLoader}, so a module above the server (the bench suites)
 * can add its own without the server depending on it.
 *
 * <p>Implementations are stateless, with a public no-argument constructor.
 */
public interface Subcommand {
    /** Exit status for success. */
    int OK = 0;
    /** Exit status when the command ran and found a failure (a failed conformance case, say). */
    int FAILED = 1;
    /** Exit status for bad arguments. */
    int USAGE = 2;

    /** The word that selects this subcommand. */
    String name();

    /** One line for the overview in {@code hicache --help}. */
    String summary();

    /** The full help text: usage line, options, examples. */
    String help();

    /**
     * Runs the subcommand.
     *
     * @param args the arguments after the subcommand's name
     * @return the process exit status: {@link #OK}, {@link #FAILED} or {@link #USAGE}
     */
    int run(List<String> args, PrintStream out, PrintStream err) throws Exception;
}
