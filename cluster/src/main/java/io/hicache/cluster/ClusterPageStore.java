package io.hicache.cluster;

import io.hicache.core.Deadline;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * The {@code cluster} page store: the daemons of a cluster as one store (docs/cluster.md). Each batch is split by
 * owner ({@link Placement}, from the {@link Membership} etcd keeps), the parts go to their members at once over
 * {@link RemotePageStore}s, and the answers are put back in order. {@code leadingHits} stays "leading pages present"
 * across owners: each owner counts its own pages, and the first page any owner lacks ends the prefix.
 *
 * <p>Node loss is a bounded miss: a member that cannot be reached (refused, dead, stopped) answers its pages FAILED
 * (or TIMED_OUT) within the call's deadline, never later, and is tried again on a later call (at most once a second
 * while it keeps failing to connect). With {@code cluster.replicas} above 1, puts go to every owner of a page and a
 * read whose owner fails is asked of the next one. Members that leave are disconnected; a member that comes back
 * under the same id (a new epoch) is connected again and serves what its slab kept.
 *
 * <p>Thread-safe. Owns its membership view and its connections; {@link #close()} closes them.
 */
public final class ClusterPageStore extends AbstractPageStore {
    private static final System.Logger LOG = System.getLogger(ClusterPageStore.class.getName());
    /** How long a member that could not be connected is left alone before the next try. */
    private static final long RETRY_CONNECT_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final Membership membership;
    private final RemoteStoreConfig remote;
    private final Map<String, Link> links = new ConcurrentHashMap<>();
    private final ExecutorService connector;

    /** One member's connection: opened on first use, off the caller's thread. */
    private final class Link {
        final ClusterMember member;
        private @Nullable CompletableFuture<RemotePageStore> store;
        private long failedAtNanos;
        private boolean failed;

        Link(ClusterMember member) {
            this.member = member;
        }

        /** The member's store, connecting if needed; failed while a recent try failed. */
        synchronized CompletableFuture<RemotePageStore> store() {
            if (store != null && !(failed && System.nanoTime() - failedAtNanos > RETRY_CONNECT_NANOS)) {
                return store;
            }
            failed = false;
            CompletableFuture<RemotePageStore> s = CompletableFuture.supplyAsync(
                    () -> RemotePageStore.open(new RemoteStoreConfig(
                            member.host(),
                            member.port(),
                            remote.authToken(),
                            remote.connections(),
                            remote.connectTimeout(),
                            remote.transport(),
                            remote.tls(), // remote.tls* and remote.put-unchecked apply to every member
                            remote.putUnchecked())),
                    connector);
            s.whenComplete((v, e) -> {
                if (e != null) {
                    synchronized (this) {
                        failed = true;
                        failedAtNanos = System.nanoTime();
                    }
                }
            });
            store = s;
            return s;
        }

        synchronized void close() {
            CompletableFuture<RemotePageStore> s = store;
            store = null;
            if (s != null) {
                s.thenAccept(RemotePageStore::close);
            }
        }
    }

    private ClusterPageStore(Membership membership, RemoteStoreConfig remote, long maxPageBytes) {
        super(
                "cluster",
                "cluster '" + membership.config().name() + "' at "
                        + membership.config().etcd(),
                new StoreCapabilities(EnumSet.of(Capability.SHARED), maxPageBytes, 256));
        this.membership = membership;
        this.remote = remote;
        this.connector = Executors.newCachedThreadPool(
                Thread.ofPlatform().name("hicache-cluster-connect-", 0).daemon().factory());
        membership.onChange(this::membershipChanged);
    }

    /**
     * Opens the store on the cluster {@code config} names; {@code remote} gives the connections' token, count,
     * timeout and transport (its host and port are ignored: the members say theirs).
     *
     * @throws HiCacheException STORE_IO when etcd cannot be read now
     */
    public static ClusterPageStore open(ClusterConfig config, RemoteStoreConfig remote) {
        Membership m = Membership.open(config);
        return new ClusterPageStore(m, remote, 16L << 20);
    }

    /** The membership it follows. */
    public Membership membership() {
        return membership;
    }

    private void membershipChanged(Membership.View view) {
        Set<String> live = new HashSet<>();
        for (ClusterMember m : view.members()) {
            live.add(m.id());
            Link l = links.get(m.id());
            if (l != null && !l.member.equals(m)) { // a new epoch or address: connect afresh
                links.remove(m.id(), l);
                l.close();
            }
        }
        for (Map.Entry<String, Link> e : links.entrySet()) {
            if (!live.contains(e.getKey()) && links.remove(e.getKey(), e.getValue())) {
                e.getValue().close();
            }
        }
        LOG.log(
                Level.INFO,
                "cluster '" + membership.config().name() + "': "
                        + view.members().size() + " members");
    }

    private Link link(ClusterMember m) {
        return links.computeIfAbsent(m.id(), id -> new Link(m));
    }

    /** Pages of a batch grouped by the member that is to serve them, keeping their order. */
    private static Map<Integer, List<Integer>> byOwner(
            Placement p, List<StoreKey> keys, int[] rank, @Nullable List<Integer> only) {
        Map<Integer, List<Integer>> groups = new LinkedHashMap<>();
        int n = only == null ? keys.size() : only.size();
        for (int j = 0; j < n; j++) {
            int i = only == null ? j : only.get(j);
            int[] owners = p.owners(Placement.slotOf(keys.get(i).hash()));
            if (rank[i] < owners.length) {
                groups.computeIfAbsent(owners[rank[i]], o -> new ArrayList<>()).add(i);
            }
        }
        return groups;
    }

    /** {@code call} on member {@code m}'s store, bounded by {@code deadline}; failed when it cannot be reached. */
    private <T> CompletableFuture<T> onMember(
            ClusterMember m,
            Deadline deadline,
            java.util.function.Function<RemotePageStore, CompletableFuture<T>> call) {
        long ms = Math.max(1, deadline.remainingNanos() / 1_000_000);
        return link(m).store()
                .copy()
                .orTimeout(ms, TimeUnit.MILLISECONDS) // a stopped member must not hold a call past its deadline
                .thenCompose(call);
    }

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        Placement p = membership.view().placement();
        if (p.members().isEmpty()) {
            return CompletableFuture.completedFuture(0);
        }
        Map<Integer, List<Integer>> groups = byOwner(p, keys, new int[keys.size()], null);
        List<CompletableFuture<Integer>> firstMissing = new ArrayList<>();
        for (Map.Entry<Integer, List<Integer>> g : groups.entrySet()) {
            List<Integer> idx = g.getValue();
            List<StoreKey> sub = idx.stream().map(keys::get).toList();
            firstMissing.add(onMember(p.members().get(g.getKey()), deadline, s -> s.leadingHits(sub, deadline))
                    .handle((n, e) ->
                            e != null || n == null ? idx.getFirst() : n < idx.size() ? idx.get(n) : keys.size()));
        }
        return CompletableFuture.allOf(firstMissing.toArray(CompletableFuture[]::new))
                .thenApply(v -> {
                    int hits = keys.size();
                    for (CompletableFuture<Integer> f : firstMissing) {
                        hits = Math.min(hits, f.join()); // a page missing at any owner ends the prefix there
                    }
                    return hits;
                });
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        Placement p = membership.view().placement();
        PageStatus[] out = new PageStatus[targets.size()];
        String[] detail = new String[targets.size()];
        java.util.Arrays.fill(out, PageStatus.FAILED);
        java.util.Arrays.fill(detail, "the cluster has no members");
        return getRound(p, targets, deadline, new int[targets.size()], null, out, detail)
                .thenApply(v -> {
                    BatchResult.Builder b = BatchResult.builder(out.length);
                    for (int i = 0; i < out.length; i++) {
                        b.set(i, out[i], out[i] == PageStatus.OK ? null : detail[i]);
                    }
                    return b.build();
                });
    }

    /** One round of a get: each page from its owner of rank {@code rank[i]}; pages whose owner failed go to the next. */
    private CompletableFuture<Void> getRound(
            Placement p,
            PageBatch targets,
            Deadline deadline,
            int[] rank,
            @Nullable List<Integer> only,
            PageStatus[] out,
            String[] detail) {
        Map<Integer, List<Integer>> groups = byOwner(p, targets.keys(), rank, only);
        if (groups.isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        List<Integer> retry = java.util.Collections.synchronizedList(new ArrayList<>());
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (Map.Entry<Integer, List<Integer>> g : groups.entrySet()) {
            ClusterMember m = p.members().get(g.getKey());
            List<Integer> idx = g.getValue();
            PageBatch.Builder sub = PageBatch.builder(idx.size());
            for (int i : idx) {
                sub.add(targets.key(i), targets.page(i));
            }
            PageBatch batch = sub.build();
            parts.add(onMember(m, deadline, s -> s.get(batch, deadline)).handle((r, e) -> {
                for (int j = 0; j < idx.size(); j++) {
                    int i = idx.get(j);
                    PageStatus st = e != null ? PageStatus.FAILED : r.status(j);
                    out[i] = st;
                    detail[i] = e != null
                            ? "member " + m.id() + " (" + m.address() + ") unreachable: " + rootMessage(e)
                            : r.detail(j).orElse(st.name());
                    // A corrupt copy (which its member removed) is a reason to ask the next replica, as a failure is.
                    if ((st == PageStatus.FAILED || st == PageStatus.TIMED_OUT || st == PageStatus.CORRUPT)
                            && !deadline.isOver()) {
                        rank[i]++;
                        retry.add(i);
                    }
                }
                return null;
            }));
        }
        return CompletableFuture.allOf(parts.toArray(CompletableFuture[]::new))
                .thenCompose(v -> retry.isEmpty() || p.replicas() <= 1
                        ? CompletableFuture.completedFuture(null)
                        : getRound(p, targets, deadline, rank, List.copyOf(retry), out, detail));
    }

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        // a page is stored when any of its owners stored it
        return onEveryOwner(
                sources.keys(),
                deadline,
                PageStatus.FAILED,
                (store, idx) -> {
                    PageBatch.Builder sub = PageBatch.builder(idx.size());
                    for (int i : idx) {
                        sub.add(sources.key(i), sources.page(i));
                    }
                    return store.put(sub.build(), deadline);
                },
                (sofar, got) -> !sofar.isSuccess() && (got.isSuccess() || sofar == PageStatus.FAILED));
    }

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        // removed when any owner removed it; a miss only where every owner missed it
        return onEveryOwner(
                keys,
                deadline,
                PageStatus.MISS,
                (store, idx) -> store.delete(idx.stream().map(keys::get).toList(), deadline),
                (sofar, got) -> sofar != PageStatus.OK && got != PageStatus.MISS);
    }

    /** Whether an owner's status for a page replaces what the page's other owners said so far. */
    @FunctionalInterface
    private interface Merge {
        boolean replaces(PageStatus sofar, PageStatus got);
    }

    /**
     * {@code call} on every owner of the pages of {@code keys} (each replica rank, each member's part at once), the
     * statuses merged page by page; {@code initial} for a page no owner answered (no members: FAILED with a reason).
     */
    private CompletableFuture<BatchResult> onEveryOwner(
            List<StoreKey> keys,
            Deadline deadline,
            PageStatus initial,
            java.util.function.BiFunction<RemotePageStore, List<Integer>, CompletableFuture<BatchResult>> call,
            Merge merge) {
        Placement p = membership.view().placement();
        PageStatus[] out = new PageStatus[keys.size()];
        String[] detail = new String[keys.size()];
        java.util.Arrays.fill(out, initial);
        java.util.Arrays.fill(detail, "the cluster has no members");
        List<CompletableFuture<Void>> parts = new ArrayList<>();
        for (int r = 0; r < p.replicas(); r++) {
            int[] rank = new int[keys.size()];
            java.util.Arrays.fill(rank, r);
            for (Map.Entry<Integer, List<Integer>> g :
                    byOwner(p, keys, rank, null).entrySet()) {
                ClusterMember m = p.members().get(g.getKey());
                List<Integer> idx = g.getValue();
                parts.add(onMember(m, deadline, s -> call.apply(s, idx)).handle((res, e) -> {
                    synchronized (out) {
                        for (int j = 0; j < idx.size(); j++) {
                            int i = idx.get(j);
                            PageStatus st = e != null ? PageStatus.FAILED : res.status(j);
                            if (merge.replaces(out[i], st)) {
                                out[i] = st;
                                detail[i] = e != null
                                        ? "member " + m.id() + " (" + m.address() + ") unreachable: " + rootMessage(e)
                                        : res.detail(j).orElse(st.name());
                            }
                        }
                    }
                    return null;
                }));
            }
        }
        return CompletableFuture.allOf(parts.toArray(CompletableFuture[]::new)).thenApply(v -> {
            BatchResult.Builder b = BatchResult.builder(out.length);
            for (int i = 0; i < out.length; i++) {
                boolean plain = out[i].isSuccess() || out[i] == PageStatus.MISS;
                b.set(i, out[i], plain ? null : detail[i]);
            }
            return b.build();
        });
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return everyMember(deadline, s -> s.clear(namespace, deadline));
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        return everyMember(deadline, s -> s.clearAll(deadline));
    }

    private CompletableFuture<Void> everyMember(
            Deadline deadline, java.util.function.Function<RemotePageStore, CompletableFuture<Void>> call) {
        List<CompletableFuture<Void>> all = new ArrayList<>();
        for (ClusterMember m : membership.view().members()) {
            all.add(onMember(m, deadline, call));
        }
        return CompletableFuture.allOf(all.toArray(CompletableFuture[]::new));
    }

    /** False: each member removes its own corrupt copy; the other replicas are good. */
    @Override
    protected boolean removesCorruptPages() {
        return false;
    }

    @Override
    protected void doClose() {
        membership.close();
        for (Link l : links.values()) {
            l.close();
        }
        links.clear();
        connector.shutdown();
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t instanceof java.util.concurrent.TimeoutException
                ? "no connection before the deadline"
                : String.valueOf(t.getMessage());
    }
}
