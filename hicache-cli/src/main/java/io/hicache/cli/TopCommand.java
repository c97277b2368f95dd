package io.hicache.cli;

import io.hicache.cluster.ClusterConfig;
import io.hicache.cluster.ClusterMember;
import io.hicache.cluster.Membership;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.config.Units;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.io.PrintWriter;
import java.time.Duration;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
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

    @Option(
            names = "--cluster.etcd",
            paramLabel = "ENDPOINTS",
            description = "show a whole cluster (docs/cluster.md) instead of one daemon: etcd's client endpoints; its "
                    + "members' figures are summed, and the title says which answer")
    @Nullable
    String clusterEtcd;

    @Option(
            names = "--cluster.name",
            paramLabel = "NAME",
            defaultValue = "hicache",
            description = "the cluster's name, with --cluster.etcd (default ${DEFAULT-VALUE})")
    String clusterName;

    @Override
    public Integer call() throws Exception {
        if (interval.isNegative() || interval.isZero()) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--interval must be positive");
        }
        if (clusterEtcd != null) {
            return cluster(clusterEtcd);
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

    /** {@code top --cluster.etcd}: every member read each refresh, their figures summed. */
    private int cluster(String etcd) throws Exception {
        ClusterConfig config = ClusterConfig.from(
                Settings.empty().with(ClusterConfig.ETCD.key(), etcd).with(ClusterConfig.NAME.key(), clusterName));
        PrintWriter out = spec.commandLine().getOut();
        boolean terminal = Progress.isTerminal();
        Map<String, RemotePageStore> clients = new HashMap<>();
        try (Membership members = Membership.open(config);
                KeyPresses keys = KeyPresses.open()) {
            DaemonMetrics before = readMembers(members, clients, new ArrayList<>());
            for (int shown = 0; count == 0 || shown < count; shown++) {
                if (keys.quitWithin(interval)) {
                    break;
                }
                List<String> missing = new ArrayList<>();
                DaemonMetrics now = readMembers(members, clients, missing);
                int listed = members.view().members().size();
                out.print(terminal ? CLEAR : "");
                out.println("hicache top: cluster '" + clusterName + "', " + (listed - missing.size()) + " of " + listed
                        + " members answering"
                        + (missing.isEmpty() ? "" : " (missing: " + String.join(", ", missing) + ")")
                        + (members.etcdReachable() ? "" : "; etcd does not answer, last view") + " at "
                        + LocalTime.now().format(DateTimeFormatter.ofPattern("HH:mm:ss")));
                TopView.rates(before, now).forEach(out::println);
                if (!terminal) {
                    out.println();
                }
                out.flush();
                before = now;
            }
        } finally {
            clients.values().forEach(RemotePageStore::close);
        }
        return OK;
    }

    /** Every member's reading, summed; members that do not answer are named in {@code missing}. */
    private DaemonMetrics readMembers(Membership members, Map<String, RemotePageStore> clients, List<String> missing) {
        List<DaemonMetrics> readings = new ArrayList<>();
        for (ClusterMember m : members.view().members()) {
            try {
                RemotePageStore c = clients.get(m.id());
                if (c == null) {
                    c = RemotePageStore.open(
                            new RemoteStoreConfig(m.host(), m.port(), daemon.authToken, 1, Duration.ofSeconds(2)));
                    clients.put(m.id(), c);
                }
                readings.add(DaemonAddress.read(c));
            } catch (Exception e) {
                missing.add(m.id());
                RemotePageStore dead = clients.remove(m.id());
                if (dead != null) {
                    dead.close();
                }
            }
        }
        return DaemonMetrics.sum(readings);
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
