package io.hicache.cluster;

import io.hicache.cluster.etcd.EtcdGateway;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import java.net.URI;
import java.time.Duration;
import java.util.List;

/**
 * Where a cluster's membership is and how it is kept: read once, checked, for daemons and clients alike. Immutable.
 *
 * @param etcd        etcd's client endpoints
 * @param name        the cluster's name: its members are under {@code /hicache/<name>/members/} in etcd
 * @param leaseTtl    how long a member that stopped renewing stays listed (its lease's TTL, whole seconds)
 * @param etcdTimeout the most one call to etcd may take
 * @param replicas    owners per slot: writes go to each, reads try them in order
 */
public record ClusterConfig(List<URI> etcd, String name, Duration leaseTtl, Duration etcdTimeout, int replicas) {
    public static final Setting<String> ETCD = Setting.string(
            "cluster.etcd", "", "etcd's client endpoints, comma-separated (http://127.0.0.1:2379); empty: no cluster");
    public static final Setting<String> NAME =
            Setting.string("cluster.name", "hicache", "the cluster's name: members of one name share placement");
    public static final Setting<Duration> LEASE_TTL = Setting.duration(
            "cluster.lease-ttl", "5s", "how long a member that stopped renewing its etcd lease stays listed");
    public static final Setting<Duration> ETCD_TIMEOUT =
            Setting.duration("cluster.etcd-timeout", "2s", "the most one call to etcd may take");
    public static final Setting<Integer> REPLICAS =
            Setting.integer("cluster.replicas", 1, 1, 8, "owners per slot: writes go to each, reads try them in order");

    public static final Setting<String> MEMBER_ID = Setting.string(
            "cluster.member-id",
            "",
            "a daemon's id in the cluster; keep it across restarts to own the same slots (empty: its host:port)");
    public static final Setting<String> ADVERTISE_HOST = Setting.string(
            "cluster.advertise-host",
            "",
            "the address a daemon tells clients to connect to (empty: server.bind, which must then not be a "
                    + "wildcard)");

    /** Every setting a client reads. */
    public static final List<Setting<?>> SETTINGS = List.of(ETCD, NAME, LEASE_TTL, ETCD_TIMEOUT, REPLICAS);

    /** Every setting a daemon reads: a client's, and its own id and address. */
    public static final List<Setting<?>> DAEMON_SETTINGS =
            List.of(ETCD, NAME, LEASE_TTL, ETCD_TIMEOUT, REPLICAS, MEMBER_ID, ADVERTISE_HOST);

    public ClusterConfig {
        Checks.checkNotNull(etcd, "etcd");
        Checks.requireArgument(!etcd.isEmpty(), "cluster.etcd names no endpoint");
        Checks.checkNotNull(name, "name");
        Checks.requireArgument(
                name.matches("[A-Za-z0-9._-]{1,64}"),
                "cluster.name is letters, digits, '.', '_' and '-' (1 to 64), was '%s'",
                name);
        Checks.requireArgument(
                leaseTtl.toMillis() >= 2000 && leaseTtl.toMillis() % 1000 == 0,
                "cluster.lease-ttl is whole seconds, at least 2s (etcd's leases count seconds), was %s",
                leaseTtl);
        Checks.requireArgument(etcdTimeout.isPositive(), "cluster.etcd-timeout must be positive");
        etcd = List.copyOf(etcd);
    }

    /** Whether {@code settings} ask for a cluster ({@code cluster.etcd} set). */
    public static boolean requested(Settings settings) {
        return !settings.get(ETCD).isBlank();
    }

    /**
     * Reads the configuration.
     *
     * @throws io.hicache.core.HiCacheException CONFIG_INVALID naming the bad setting
     */
    public static ClusterConfig from(Settings settings) {
        return settings.read(s -> {
            return new ClusterConfig(
                    EtcdGateway.endpoints(s.get(ETCD)),
                    s.get(NAME),
                    s.get(LEASE_TTL),
                    s.get(ETCD_TIMEOUT),
                    s.get(REPLICAS));
        });
    }

    /**
     * The record a daemon listening on {@code bind:port} with {@code capacityBytes} registers, per
     * {@code cluster.member-id} and {@code cluster.advertise-host}.
     *
     * @throws io.hicache.core.HiCacheException CONFIG_INVALID when the daemon listens on a wildcard address and no
     *     advertise host is set (clients could not reach it)
     */
    public static ClusterMember self(Settings settings, String bind, int port, long capacityBytes) {
        return settings.read(s -> {
            String host = s.get(ADVERTISE_HOST).isBlank()
                    ? bind
                    : s.get(ADVERTISE_HOST).trim();
            Checks.requireArgument(
                    !host.equals("0.0.0.0") && !host.equals("::") && !host.isBlank(),
                    "server.bind is %s, which clients cannot connect to: set cluster.advertise-host",
                    host);
            String id = s.get(MEMBER_ID).isBlank()
                    ? host + ":" + port
                    : s.get(MEMBER_ID).trim();
            return new ClusterMember(id, host, port, capacityBytes, System.currentTimeMillis());
        });
    }

    /**
     * A daemon's member id as far as it is known before its port is bound: {@code cluster.member-id}, or its
     * {@code host:port} when the port is fixed; empty for port 0 without an id.
     */
    public static java.util.Optional<String> memberIdBeforeBinding(Settings settings, String bind, int port) {
        return settings.read(s -> {
            if (!s.get(MEMBER_ID).isBlank()) {
                return java.util.Optional.of(s.get(MEMBER_ID).trim());
            }
            String host = s.get(ADVERTISE_HOST).isBlank()
                    ? bind
                    : s.get(ADVERTISE_HOST).trim();
            return port == 0 ? java.util.Optional.<String>empty() : java.util.Optional.of(host + ":" + port);
        });
    }

    /** The etcd prefix of the members' records. */
    public String membersPrefix() {
        return "/hicache/" + name + "/members/";
    }
}
