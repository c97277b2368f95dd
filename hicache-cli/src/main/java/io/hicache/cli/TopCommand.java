package io.hicache.cli;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.storage.remote.RemotePageStore;
import java.io.PrintWriter;
import java.time.Duration;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.List;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code hicache top}: a live view of a running daemon, refreshed every interval: throughput, request rates and
 * latency by operation, hit rate, slab use, write-behind backlog, connections. On a terminal the screen is redrawn in
 * place; otherwise one block of plain lines per refresh (no escape codes). Runs once, until interrupted or
 * {@code --count} refreshes.
 */
@Command(
        name = "top",
        header = "show a running daemon live, refreshed every second",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        description = "Shows a running daemon live: throughput, requests per second and mean latency by operation, hit "
                + "rate, slab use, write-behind backlog and connections, refreshed every --interval; same-host "
                + "clients' bytes (leases and reservations, which never cross a socket) are counted apart. q or "
                + "Ctrl-C stops it.",
        footer = {
            "%nExamples:",
            "  hicache top",
            "  hicache top --port 7371 --interval 5s",
            "  hicache top --count 3 > top.log     (plain lines when not a terminal)"
        })
public final class TopCommand implements Subcommand {
    private static final String CLEAR = "\033[H\033[2J";

    @Spec
    CommandSpec spec;

    @Mixin
    DaemonAddress daemon;

    @Option(
            names = "--interval",
            paramLabel = "DURATION",
            defaultValue = "1s",
            converter = DurationConverter.class,
            description = "time between refreshes (default ${DEFAULT-VALUE})")
    Duration interval;

    @Option(
            names = "--count",
            paramLabel = "N",
            defaultValue = "0",
            description = "stop after N refreshes (default 0: until interrupted)")
    int count;

    @Override
    public Integer call() throws Exception {
        if (interval.isNegative() || interval.isZero()) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--interval must be positive");
        }
        PrintWriter out = spec.commandLine().getOut();
        boolean terminal = Progress.isTerminal();
        try (RemotePageStore client = daemon.connect();
                KeyPresses keys = KeyPresses.open()) {
            DaemonMetrics before = DaemonAddress.read(client);
            for (int shown = 0; count == 0 || shown < count; shown++) {
                if (keys.quitWithin(interval)) {
                    break;
                }
                DaemonMetrics now = readOrEnd(client);
                List<String> lines = TopView.rates(before, now);
                String title = "hicache top: " + daemon.host + ":" + daemon.port + " at "
                        + LocalTime.now().format(DateTimeFormatter.ofPattern("HH:mm:ss")) + ", every "
                        + interval.toMillis() / 1000.0 + " s";
                out.print(terminal ? CLEAR : "");
                out.println(title);
                lines.forEach(out::println);
                if (!terminal) {
                    out.println();
                }
                out.flush();
                before = now;
            }
        }
        return OK;
    }

    /** A reading; a daemon that stops answering ends top with one line saying so, not a stack trace. */
    private DaemonMetrics readOrEnd(RemotePageStore client) {
        try {
            return DaemonAddress.read(client);
        } catch (Exception e) {
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "the daemon at " + daemon.host + ":" + daemon.port + " stopped answering (" + UserErrors.describe(e)
                            + "); top ends",
                    e);
        }
    }

    /** Reads {@code 1s}, {@code 500ms} as the settings do. */
    static final class DurationConverter implements picocli.CommandLine.ITypeConverter<Duration> {
        @Override
        public Duration convert(String text) {
            return Units.parseDuration(text);
        }
    }
}
