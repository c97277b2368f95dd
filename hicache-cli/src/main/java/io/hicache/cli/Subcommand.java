package io.hicache.cli;

import java.util.concurrent.Callable;
import picocli.CommandLine.Model.CommandSpec;

/**
 * One subcommand of the {@code hicache} command line ({@code serve}, {@code conformance}, {@code bench}, ...): a
 * picocli {@code @Command} class whose {@link #call} runs it. Subcommands are found with
 * {@link java.util.ServiceLoader}, so a module above the server (the bench suites) can add its own without the server
 * depending on it.
 *
 * <p>Implementations have a public no-argument constructor; picocli fills their options, and each instance runs once.
 */
public interface Subcommand extends Callable<Integer> {
    /** Exit status for success. */
    int OK = 0;
    /** Exit status when the command ran and found a failure (a failed conformance case, say). */
    int FAILED = 1;
    /** Exit status for bad arguments (picocli's too). */
    int USAGE = 2;

    /**
     * Adds options known only at run time (the settings of the stores on the class path), before the command line is
     * parsed. Most commands have none.
     */
    default void addOptions(CommandSpec spec) {}
}
