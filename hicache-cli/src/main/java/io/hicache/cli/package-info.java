/**
 * The {@code hicache} command line: a dispatcher over {@link io.hicache.cli.Subcommand}s found on the class path, and
 * its own subcommands ({@code version}, {@code conformance}, {@code serve}); {@code bench} plugs in from hicache-bench.
 */
package io.hicache.cli;
