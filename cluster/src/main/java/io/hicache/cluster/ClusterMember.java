package io.hicache.cluster;

import io.hicache.core.util.Checks;

/**
 * One daemon of a cluster as it registers itself in etcd: its id (stable across restarts: by default its address), where
 * it listens, how much host memory it offers, and when this run of it started. Immutable.
 *
 * @param id            the member's id; placement hashes it, so a daemon restarted under the same id owns the same
 *                      slots again and serves what its warm slab kept
 * @param host          the address clients connect to
 * @param port          its port
 * @param capacityBytes its host tier's size
 * @param epochMillis   when this run started (a restart registers a new epoch)
 */
public record ClusterMember(String id, String host, int port, long capacityBytes, long epochMillis) {
    public ClusterMember {
        Checks.checkNotNull(id, "id");
        Checks.checkNotNull(host, "host");
        Checks.requireArgument(!id.isBlank(), "a member id must not be blank");
        Checks.requireArgument(!id.contains("/"), "a member id must not contain '/' (it is an etcd key part): %s", id);
        Checks.checkInRange(port, 1, 65535, "port");
        Checks.checkNotNegative(capacityBytes, "capacityBytes");
    }

    /** {@code host:port}, for logs. */
    public String address() {
        return host.contains(":") ? "[" + host + "]:" + port : host + ":" + port;
    }
}
