/**
 * The {@code hicache} command line: a dispatcher over {@link io.hicache.cli.Subcommand}s found on the class
 * path, and the server's own subcommands.
 */
package io.hicache.cli;
