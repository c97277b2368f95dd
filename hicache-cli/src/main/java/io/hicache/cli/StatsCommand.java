package io.hicache.cli;

import io.hicache.storage.remote.RemotePageStore;
import java.io.PrintWriter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code hicache stats}: one reading of a running daemon's figures, as a summary or as its raw metrics. Runs once. */
@Command(
        name = "stats",
        header = "print a running daemon's figures once",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        description = "Prints a running daemon's figures once: totals since it started (requests, bytes, hits, "
                + "evictions, write-behind) and its state now (slab use, pending write-behind, connections). "
                + "'hicache top' shows the same as rates, refreshed every second.",
        footer = {"%nExamples:", "  hicache stats", "  hicache stats --port 7371 --raw | grep write_behind"})
public final class StatsCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @Mixin
    DaemonAddress daemon;

    @Option(names = "--raw", description = "print the daemon's metrics as they come, in Prometheus' text format")
    boolean raw;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        try (RemotePageStore client = daemon.connect()) {
            if (raw) {
                out.print(DaemonAddress.text(client));
                out.flush();
                return OK;
            }
            DaemonMetrics m = DaemonAddress.read(client);
            out.println("daemon " + daemon.host + ":" + daemon.port);
            for (String line : TopView.totals(m)) {
                out.println(line);
            }
            out.flush();
            return OK;
        }
    }
}
