package io.hicache.cli;

import io.hicache.cluster.ClusterConfig;
import io.hicache.cluster.ClusterMember;
import io.hicache.cluster.Membership;
import io.hicache.cluster.Placement;
import io.hicache.core.config.Settings;
import io.hicache.core.config.Units;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.io.PrintWriter;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code hicache cluster status}: a cluster's members as etcd lists them, the slots each owns, their capacity and
 * when they started, and, asking each one, whether it answers and its hit rate. Runs once.
 */
@Command(
        name = "cluster",
        header = "show a cluster of daemons (docs/cluster.md)",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        description = "Shows a cluster of daemons: 'status' lists the members etcd knows, the share of the slots "
                + "each owns, its capacity and start, and whether it answers (with its hit rate); a member etcd "
                + "lists that does not answer is marked MISSING.",
        footer = {"%nExamples:", "  hicache cluster status --cluster.etcd http://127.0.0.1:2379"})
public final class ClusterCommand implements Subcommand {
    @Spec
    CommandSpec spec;

    @picocli.CommandLine.Parameters(
            index = "0",
            paramLabel = "status",
            description = "what to show: status (the only one)")
    String what;

    @Option(
            names = "--cluster.etcd",
            paramLabel = "ENDPOINTS",
            defaultValue = "${env:HICACHE_CLUSTER_ETCD:-http://127.0.0.1:2379}",
            description = "etcd's client endpoints (default ${DEFAULT-VALUE}: HICACHE_CLUSTER_ETCD, else local)")
    String etcd;

    @Option(
            names = "--cluster.name",
            paramLabel = "NAME",
            defaultValue = "${env:HICACHE_CLUSTER_NAME:-hicache}",
            description = "the cluster's name (default ${DEFAULT-VALUE})")
    String name;

    @Option(
            names = "--auth-token",
            paramLabel = "TEXT",
            defaultValue = "${env:HICACHE_SERVER_AUTH_TOKEN:-}",
            description = "the daemons' token (default: HICACHE_SERVER_AUTH_TOKEN, else none)")
    String authToken;

    @Override
    public Integer call() throws Exception {
        if (!"status".equals(what)) {
            throw new picocli.CommandLine.ParameterException(
                    spec.commandLine(), "unknown: " + what + " (hicache cluster status)");
        }
        ClusterConfig config = ClusterConfig.from(
                Settings.empty().with(ClusterConfig.ETCD.key(), etcd).with(ClusterConfig.NAME.key(), name));
        List<URI> endpoints = config.etcd();
        PrintWriter out = spec.commandLine().getOut();
        try (Membership m = Membership.open(config)) {
            Membership.View view = m.view();
            List<ClusterMember> members = view.members();
            out.println("cluster '" + name + "' at " + endpoints + ": " + members.size() + " members (etcd revision "
                    + view.revision() + ")");
            if (members.isEmpty()) {
                out.flush();
                return OK;
            }
            int[] slots = new Placement(members, 1).slotsPerMember();
            int missing = 0;
            List<String> rows = new ArrayList<>();
            for (int i = 0; i < members.size(); i++) {
                ClusterMember member = members.get(i);
                String health;
                try (RemotePageStore daemon = RemotePageStore.open(
                        new RemoteStoreConfig(member.host(), member.port(), authToken, 1, Duration.ofSeconds(2)))) {
                    DaemonMetrics metrics = DaemonAddress.read(daemon);
                    double host = metrics.sum("hicache_server_hits_host_total");
                    double store = metrics.sum("hicache_server_hits_store_total");
                    double miss = metrics.sum("hicache_server_misses_total");
                    double asked = host + store + miss;
                    health = asked == 0
                            ? "answers, no pages asked yet"
                            : String.format(
                                    Locale.ROOT,
                                    "answers, hit rate %.1f%% of %,.0f pages asked",
                                    100 * (host + store) / asked,
                                    asked);
                } catch (Exception e) {
                    missing++;
                    health = "MISSING: " + UserErrors.describe(e);
                }
                rows.add(String.format(
                        Locale.ROOT,
                        "  %-24s %-22s %5.1f%% of slots  %9s  up %s  %s",
                        member.id(),
                        member.address(),
                        100.0 * slots[i] / Placement.SLOTS,
                        Units.formatBytes(member.capacityBytes()),
                        age(member.epochMillis()),
                        health));
            }
            rows.forEach(out::println);
            if (missing > 0) {
                out.println(missing + " member(s) listed in etcd do not answer: their pages are misses until their "
                        + "leases expire (cluster.lease-ttl) and their slots move");
            }
            out.flush();
            return missing > 0 ? 1 : OK;
        }
    }

    private static String age(long epochMillis) {
        long s = Math.max(0, (System.currentTimeMillis() - epochMillis) / 1000);
        return s < 120 ? s + "s" : s < 7200 ? s / 60 + "m" : s / 3600 + "h";
    }
}
