package io.hicache.cluster;

import io.hicache.cluster.etcd.EtcdGateway;
import io.hicache.core.util.Checks;
import java.lang.System.Logger.Level;

/**
 * A daemon's membership: its record under a lease in etcd, renewed by a thread ({@code hicache-cluster-lease}) every
 * third of the lease's TTL. If the lease is lost (etcd was away longer than the TTL, and the record went), the thread
 * registers again when etcd answers; meanwhile the daemon serves as before. {@link #close()} revokes the lease, so a
 * graceful stop leaves at once; a daemon that dies leaves when its lease expires.
 *
 * <p>Thread-safe. Owns its etcd gateway and its thread.
 */
public final class MemberRegistration implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(MemberRegistration.class.getName());

    private final ClusterConfig config;
    private final ClusterMember self;
    private final EtcdGateway etcd;
    private final Thread thread;
    private volatile long lease;
    /** When the lease was last renewed (or granted). */
    private volatile long renewedNanos = System.nanoTime();

    private volatile boolean registered;
    private volatile boolean closed;

    private MemberRegistration(ClusterConfig config, ClusterMember self) {
        this.config = config;
        this.self = self;
        this.etcd = new EtcdGateway(config.etcd(), config.etcdTimeout());
        this.thread = Thread.ofPlatform().name("hicache-cluster-lease").daemon().unstarted(this::loop);
    }

    /**
     * Registers {@code self} in the cluster and keeps it registered. Tries once now (the log says if etcd does not
     * answer), then goes on in the background: a daemon starts whether or not etcd is up.
     */
    public static MemberRegistration start(ClusterConfig config, ClusterMember self) {
        Checks.checkNotNull(config, "config");
        Checks.checkNotNull(self, "self");
        MemberRegistration r = new MemberRegistration(config, self);
        r.register();
        r.thread.start();
        return r;
    }

    /** Whether the record is in etcd as far as this member knows (its latest renewal went through). */
    public boolean registered() {
        return registered;
    }

    /** The member this registers. */
    public ClusterMember self() {
        return self;
    }

    private boolean register() {
        try {
            long id = etcd.grant(config.leaseTtl().toSeconds());
            etcd.put(config.membersPrefix() + self.id(), MemberRecords.encode(self), id);
            lease = id;
            renewedNanos = System.nanoTime();
            if (!registered) {
                LOG.log(
                        Level.INFO,
                        "member " + self.id() + " (" + self.address() + ") joined cluster '" + config.name() + "' at "
                                + config.etcd());
            }
            registered = true;
            return true;
        } catch (EtcdGateway.EtcdException e) {
            if (registered || lease == 0) {
                LOG.log(
                        Level.WARNING,
                        "cannot register member " + self.id() + " in etcd (" + e.getMessage()
                                + "); serving, and trying again every second");
            }
            registered = false;
            lease = -1;
            return false;
        }
    }

    private void loop() {
        long period = Math.max(500, config.leaseTtl().toMillis() / 3);
        while (!closed) {
            try {
                Thread.sleep(lease > 0 ? period : 1000);
                if (closed) {
                    return;
                }
                if (lease <= 0) {
                    register();
                    continue;
                }
                long left = etcd.keepAlive(lease);
                if (left <= 0) {
                    LOG.log(
                            Level.WARNING,
                            "member " + self.id() + "'s lease expired (etcd was away longer than " + config.leaseTtl()
                                    + "); registering again");
                    registered = false;
                    register();
                } else {
                    registered = true;
                    renewedNanos = System.nanoTime();
                }
            } catch (InterruptedException e) {
                return;
            } catch (EtcdGateway.EtcdException e) {
                if (registered) {
                    LOG.log(Level.WARNING, "cannot renew member " + self.id() + "'s lease (" + e.getMessage() + ")");
                }
                registered = false;
                if (System.nanoTime() - renewedNanos > config.leaseTtl().toNanos()) {
                    lease = -1; // expired by now, or etcd says it is unknown: a new one once etcd answers
                }
            } catch (RuntimeException | Error e) { // never dies: logged, then the next renewal
                LOG.log(Level.ERROR, "the cluster lease loop failed; going on", e);
            }
        }
    }

    /** Leaves the cluster: stops renewing and revokes the lease (its record goes at once), then closes. */
    @Override
    public void close() {
        closed = true;
        thread.interrupt();
        try {
            thread.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        long id = lease;
        if (id > 0) {
            try {
                etcd.revoke(id);
                LOG.log(Level.INFO, "member " + self.id() + " left cluster '" + config.name() + "'");
            } catch (EtcdGateway.EtcdException e) {
                LOG.log(
                        Level.WARNING,
                        "could not leave the cluster at once (" + e.getMessage()
                                + "); the record goes when the lease expires");
            }
        }
        etcd.close();
    }
}
