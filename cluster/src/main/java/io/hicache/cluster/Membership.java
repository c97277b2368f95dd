package io.hicache.cluster;

import io.hicache.cluster.etcd.EtcdGateway;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.util.Checks;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * A live view of a cluster's members, as etcd lists them: read at once, then kept by a thread
 * ({@code hicache-cluster-watch}) that watches the members' prefix and reads it again on each change. When etcd cannot
 * be reached the last view stays in force (clients keep serving on it), {@link #etcdReachable()} turns false and the
 * log says so once per outage; the thread retries every second and the view catches up when etcd answers again.
 *
 * <p>Thread-safe. Owns its etcd gateway and its thread; {@link #close()} stops both.
 */
public final class Membership implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Membership.class.getName());

    /**
     * One view: the members and their placement, as of an etcd revision. Immutable.
     *
     * @param members   the members, by id
     * @param revision  etcd's revision it was read at
     * @param placement where pages live among them
     */
    public record View(List<ClusterMember> members, long revision, Placement placement) {}

    private final ClusterConfig config;
    private final EtcdGateway etcd;
    private final List<Consumer<View>> listeners = new CopyOnWriteArrayList<>();
    private final Thread watcher;
    private volatile View view;
    private volatile boolean reachable = true;
    private volatile long unreachableSinceMillis;
    private volatile boolean closed;

    private Membership(ClusterConfig config, EtcdGateway etcd, View first) {
        this.config = config;
        this.etcd = etcd;
        this.view = first;
        this.watcher =
                Thread.ofPlatform().name("hicache-cluster-watch").daemon().unstarted(this::watchLoop);
    }

    /**
     * Reads the cluster's members and starts watching them.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_IO} when etcd cannot be read now (naming the endpoints)
     */
    public static Membership open(ClusterConfig config) {
        Checks.checkNotNull(config, "config");
        EtcdGateway etcd = new EtcdGateway(config.etcd(), config.etcdTimeout());
        try {
            Membership m = new Membership(config, etcd, read(etcd, config));
            m.watcher.start();
            return m;
        } catch (EtcdGateway.EtcdException e) {
            etcd.close();
            throw new HiCacheException(
                    ErrorCode.STORE_IO,
                    "cannot read cluster '" + config.name() + "' from etcd at " + config.etcd() + ": " + e.getMessage(),
                    e);
        }
    }

    /** The view now. */
    public View view() {
        return view;
    }

    /** Calls {@code listener} with each new view from now on (on the watch thread; keep it short). */
    public void onChange(Consumer<View> listener) {
        listeners.add(Checks.checkNotNull(listener, "listener"));
    }

    /** Whether etcd answered the latest try; false while the view may be stale. */
    public boolean etcdReachable() {
        return reachable;
    }

    /** When etcd stopped answering (epoch milliseconds), 0 while it answers. */
    public long etcdUnreachableSinceMillis() {
        return reachable ? 0 : unreachableSinceMillis;
    }

    /** The configuration it follows. */
    public ClusterConfig config() {
        return config;
    }

    private static View read(EtcdGateway etcd, ClusterConfig config) throws EtcdGateway.EtcdException {
        EtcdGateway.Range r = etcd.range(config.membersPrefix());
        List<ClusterMember> members = new ArrayList<>();
        for (EtcdGateway.KeyValue kv : r.kvs()) {
            try {
                members.add(MemberRecords.decode(kv.value()));
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "skipping the unreadable member record " + kv.key() + ": " + e.getMessage());
            }
        }
        return new View(List.copyOf(members), r.revision(), new Placement(members, config.replicas()));
    }

    private void watchLoop() {
        while (!closed) {
            try {
                refresh();
                etcd.watch(config.membersPrefix(), view.revision() + 1, revision -> {
                    if (!closed) {
                        try {
                            refresh();
                        } catch (EtcdGateway.EtcdException e) {
                            unreachable(e);
                        }
                    }
                });
                if (!closed) {
                    unreachable(new EtcdGateway.EtcdException("the watch stream ended", null));
                    sleep();
                }
            } catch (EtcdGateway.EtcdException e) {
                unreachable(e);
                sleep();
            } catch (RuntimeException | Error e) { // the loop never dies: a bug is logged and the watch starts over
                LOG.log(Level.ERROR, "the cluster watch failed; starting over", e);
                sleep();
            }
        }
    }

    private void refresh() throws EtcdGateway.EtcdException {
        View next = read(etcd, config);
        if (!reachable) {
            LOG.log(
                    Level.INFO,
                    "etcd answers again; cluster '" + config.name() + "' has "
                            + next.members().size() + " members");
        }
        reachable = true;
        View before = view;
        if (next.revision() >= before.revision() && !next.members().equals(before.members())) {
            view = next;
            for (Consumer<View> l : listeners) {
                try {
                    l.accept(next);
                } catch (RuntimeException e) {
                    LOG.log(Level.WARNING, "a membership listener failed", e);
                }
            }
        } else if (next.revision() > before.revision()) {
            view = new View(before.members(), next.revision(), before.placement());
        }
    }

    private void unreachable(Exception e) {
        if (reachable && !closed) {
            unreachableSinceMillis = System.currentTimeMillis();
            LOG.log(
                    Level.WARNING,
                    "etcd at " + config.etcd() + " does not answer (" + e.getMessage()
                            + "); serving on the last view of " + view.members().size() + " members until it does");
        }
        reachable = false;
    }

    private void sleep() {
        try {
            Thread.sleep(1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops watching and closes the gateway. */
    @Override
    public void close() {
        closed = true;
        watcher.interrupt();
        etcd.close();
        try {
            watcher.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
