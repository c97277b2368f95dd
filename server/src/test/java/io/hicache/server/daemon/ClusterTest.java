package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.cluster.ClusterConfig;
import io.hicache.cluster.ClusterPageStore;
import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.RemotePageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.ChildJvm;
import io.hicache.testkit.EtcdProcess;
import io.hicache.testkit.PagePattern;
import io.hicache.testkit.RandomKeys;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 39, part 6: a real etcd and real daemons, each in a child JVM so that it can be killed or stopped, and a client
 * on the {@code cluster} store. Pages are patterns of their keys, so a wrong byte anywhere fails a check.
 */
class ClusterTest {
    private static final Namespace NS = Namespace.of("cluster-test", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    private static final int PAGE = 16 * 1024;
    private static final Duration DEADLINE = Duration.ofSeconds(2);

    private final List<Path> folders = new ArrayList<>();
    private final Map<String, ChildJvm> daemons = new HashMap<>();
    private final Arena arena = Arena.ofShared();

    @AfterEach
    void cleanUp() throws Exception {
        for (ChildJvm d : daemons.values()) {
            if (d.alive()) {
                d.signal("CONT");
                d.kill();
            }
        }
        arena.close();
        for (Path f : folders) {
            try (Stream<Path> all = Files.walk(f)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private Path folder(String prefix, boolean shm) throws IOException {
        Path base = shm && Files.isDirectory(Path.of("/dev/shm"))
                ? Path.of("/dev/shm")
                : Path.of(System.getProperty("java.io.tmpdir"));
        Path p = Files.createTempDirectory(base, prefix);
        folders.add(p);
        return p;
    }

    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Starts member {@code id} on {@code port} in a child JVM; {@code extra} settings on top. */
    private ChildJvm daemon(EtcdProcess etcd, String cluster, String id, int port, Path slab, String... extra)
            throws Exception {
        List<String> args = new ArrayList<>(List.of(
                "server.port=" + port,
                "server.metrics-port=-1",
                "server.host-dir=" + slab,
                "server.host-size=64MiB",
                "server.store=none",
                "server.shutdown-timeout=5s",
                "cluster.etcd=" + etcd.endpoint(),
                "cluster.name=" + cluster,
                "cluster.lease-ttl=2s",
                "cluster.member-id=" + id));
        args.addAll(List.of(extra));
        ChildJvm d = ChildJvm.start(ClusterChildDaemon.class, args);
        daemons.put(id, d);
        assertTrue(d.awaitLine("port ", 60, TimeUnit.SECONDS), () -> "member " + id + ": " + d.lines());
        return d;
    }

    private static ClusterPageStore client(EtcdProcess etcd, String cluster) {
        return ClusterPageStore.open(
                new ClusterConfig(etcd.endpoints(), cluster, Duration.ofSeconds(2), Duration.ofSeconds(2), 1),
                new RemoteStoreConfig("127.0.0.1", 1, "", 2, Duration.ofSeconds(1)));
    }

    private static List<StoreKey> keys(int n, long seed) {
        return RandomKeys.of(NS, n, seed);
    }

    private BatchResult put(ClusterPageStore store, List<StoreKey> keys) throws Exception {
        PageBatch.Builder b = PageBatch.builder(keys.size());
        for (StoreKey k : keys) {
            MemorySegment page = arena.allocate(PAGE);
            PagePattern.fill(page, k);
            b.add(k, page);
        }
        return store.put(b.build(), Deadline.after(DEADLINE)).get();
    }

    /** Gets {@code keys}; every OK page is checked byte for byte. */
    private BatchResult get(ClusterPageStore store, List<StoreKey> keys) throws Exception {
        List<MemorySegment> targets = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            targets.add(arena.allocate(PAGE));
        }
        BatchResult r =
                store.get(PageBatch.of(keys, targets), Deadline.after(DEADLINE)).get();
        for (int i = 0; i < keys.size(); i++) {
            if (r.status(i) == PageStatus.OK) {
                assertTrue(PagePattern.matches(targets.get(i), keys.get(i)), "page " + i + " has wrong bytes");
            }
        }
        return r;
    }

    private static void await(BooleanSupplier condition, Duration timeout, String what) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, what);
            Thread.sleep(20);
        }
    }

    /** A daemon's metric, from its STATS answer; -1 when it cannot be read. */
    private static double metric(RemotePageStore daemon, String name) {
        try {
            for (String line :
                    daemon.daemonMetrics(Deadline.after(DEADLINE)).get().split("\n")) {
                if (line.startsWith(name + " ")) {
                    return Double.parseDouble(line.substring(name.length() + 1).trim());
                }
            }
        } catch (Exception e) {
            return -1;
        }
        return -1;
    }

    private static String ownerOf(ClusterPageStore s, StoreKey k) {
        return s.membership().view().placement().ownerOf(k.hash()).id();
    }

    @Test
    void aClusterSpreadsPagesAndANodeLossIsABoundedMiss() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            int[] ports = {freePort(), freePort(), freePort()};
            for (int i = 0; i < 3; i++) {
                daemon(etcd, "loss", "m" + i, ports[i], folder("hicache-cluster-slab-", true));
            }
            try (ClusterPageStore store = client(etcd, "loss")) {
                await(() -> store.membership().view().members().size() == 3, Duration.ofSeconds(10), "3 members");
                List<StoreKey> keys = keys(600, 1);
                BatchResult put = put(store, keys);
                assertEquals(600, put.successCount(), put::toString);
                Map<String, Integer> per = new HashMap<>();
                keys.forEach(k -> per.merge(ownerOf(store, k), 1, Integer::sum));
                assertEquals(3, per.size(), "every member owns some pages: " + per);
                assertEquals(600, get(store, keys).count(PageStatus.OK));
                assertEquals(
                        600, store.leadingHits(keys, Deadline.after(DEADLINE)).get());

                // SIGKILL m0: its pages fail within the deadline, every other page is served as before
                List<StoreKey> lost = keys.stream()
                        .filter(k -> ownerOf(store, k).equals("m0"))
                        .toList();
                daemons.get("m0").kill();
                long start = System.nanoTime();
                BatchResult after = get(store, keys);
                assertTrue(
                        System.nanoTime() - start < DEADLINE.toNanos() + 1_000_000_000L,
                        "no call outlives its deadline");
                assertEquals(600 - lost.size(), after.count(PageStatus.OK), after::toString);
                for (int i = 0; i < keys.size(); i++) {
                    assertEquals(lost.contains(keys.get(i)), after.status(i) != PageStatus.OK, "page " + i);
                }
                // within the lease's TTL m0 leaves the view; its slots go to the others, which never had its pages
                await(() -> store.membership().view().members().size() == 2, Duration.ofSeconds(6), "m0 left");
                BatchResult later = get(store, lost);
                assertEquals(lost.size(), later.count(PageStatus.MISS), "a moved page is a miss: " + later);
                int firstLost = keys.indexOf(lost.getFirst());
                assertEquals(
                        firstLost,
                        store.leadingHits(keys, Deadline.after(DEADLINE)).get(),
                        "exists: the leading pages up to the first one lost");

                // m0 comes back (a new epoch): it owns its slots again and serves what is put from now on
                daemon(etcd, "loss", "m0", ports[0], folder("hicache-cluster-slab-", true));
                await(() -> store.membership().view().members().size() == 3, Duration.ofSeconds(10), "m0 rejoined");
                assertEquals(lost.size(), put(store, lost).successCount());
                BatchResult all = get(store, keys);
                Map<String, Integer> failedBy = new HashMap<>();
                for (int i = 0; i < keys.size(); i++) {
                    if (all.status(i) != PageStatus.OK) {
                        failedBy.merge(
                                ownerOf(store, keys.get(i)) + " "
                                        + all.detail(i).orElse(""),
                                1,
                                Integer::sum);
                    }
                }
                assertEquals(
                        600,
                        all.count(PageStatus.OK),
                        () -> "failed: " + failedBy + " " + store.membership().view());

                // SIGSTOP m1: its pages time out or fail within the deadline, nothing hangs; SIGCONT: served again
                long m1 = keys.stream()
                        .filter(k -> ownerOf(store, k).equals("m1"))
                        .count();
                daemons.get("m1").signal("STOP"); // stopped past its lease's TTL, it also leaves the view
                try {
                    start = System.nanoTime();
                    BatchResult stopped = get(store, keys);
                    assertTrue(System.nanoTime() - start < DEADLINE.toNanos() + 1_500_000_000L, "deadlines hold");
                    assertEquals(600 - m1, stopped.count(PageStatus.OK), stopped::toString);
                } finally {
                    daemons.get("m1").signal("CONT");
                }
                await(
                        () -> {
                            try {
                                return get(store, keys).count(PageStatus.OK) == 600;
                            } catch (Exception e) {
                                return false;
                            }
                        },
                        Duration.ofSeconds(15),
                        "m1 serves again");
            }
        }
    }

    @Test
    void aJoinMovesAboutAQuarterOfFourAndEtcdAwayLeavesServiceAsItWas() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            for (int i = 0; i < 3; i++) {
                daemon(etcd, "join", "j" + i, freePort(), folder("hicache-cluster-slab-", true));
            }
            try (ClusterPageStore store = client(etcd, "join")) {
                await(() -> store.membership().view().members().size() == 3, Duration.ofSeconds(10), "3 members");
                List<StoreKey> keys = keys(2000, 2);
                assertEquals(2000, put(store, keys).successCount());
                Map<StoreKey, String> before = new HashMap<>();
                keys.forEach(k -> before.put(k, ownerOf(store, k)));
                daemon(etcd, "join", "j3", freePort(), folder("hicache-cluster-slab-", true));
                await(() -> store.membership().view().members().size() == 4, Duration.ofSeconds(10), "j3 joined");
                int moved = 0;
                for (StoreKey k : keys) {
                    String now = ownerOf(store, k);
                    if (!now.equals(before.get(k))) {
                        assertEquals("j3", now, "a page moved between old members");
                        moved++;
                    }
                }
                assertTrue(moved > 2000 / 4 * 0.8 && moved < 2000 / 4 * 1.2, moved + " of 2000 pages moved");
                assertEquals(2000 - moved, get(store, keys).count(PageStatus.OK), "moved pages are misses, others hit");

                // etcd stops: the client keeps its last view and the daemons keep serving
                etcd.stop();
                await(() -> !store.membership().etcdReachable(), Duration.ofSeconds(10), "the outage is seen");
                assertEquals(4, store.membership().view().members().size());
                assertEquals(2000 - moved, get(store, keys).count(PageStatus.OK));
                etcd.restart();
                await(() -> store.membership().etcdReachable(), Duration.ofSeconds(15), "etcd is back");
                await(
                        () -> store.membership().view().members().size() == 4,
                        Duration.ofSeconds(15),
                        "every member is registered again");
            }
        }
    }

    @Test
    void aMemberStoppedAndStartedUnderItsIdServesItsWarmSlab() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            int port = freePort();
            Path slab = folder("hicache-cluster-slab-", true);
            daemon(etcd, "warm", "w0", port, slab, "server.host-keep=true");
            daemon(etcd, "warm", "w1", freePort(), folder("hicache-cluster-slab-", true));
            try (ClusterPageStore store = client(etcd, "warm")) {
                await(() -> store.membership().view().members().size() == 2, Duration.ofSeconds(10), "2 members");
                List<StoreKey> keys = keys(200, 5);
                assertEquals(200, put(store, keys).successCount());
                List<StoreKey> mine = keys.stream()
                        .filter(k -> ownerOf(store, k).equals("w0"))
                        .toList();
                int exit = daemons.get("w0").terminate(Duration.ofSeconds(30));
                assertTrue(exit == 0 || exit == 143, "a graceful stop (SIGTERM: 143), was " + exit);
                await(() -> store.membership().view().members().size() == 1, Duration.ofSeconds(3), "w0 left at once");
                daemon(etcd, "warm", "w0", port, slab, "server.host-keep=true"); // no L3: only the slab can serve
                await(() -> store.membership().view().members().size() == 2, Duration.ofSeconds(10), "w0 rejoined");
                BatchResult r = get(store, mine);
                assertEquals(mine.size(), r.count(PageStatus.OK), "its warm slab serves them: " + r);
            }
        }
    }

    @Test
    void aMemberRestartedUnderItsIdServesWhatItsOwnL3Kept() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            int port = freePort();
            Path l3 = folder("hicache-cluster-own-l3-", false).resolve("store");
            String[] ownL3 = {"server.store=file", "file.root=" + l3};
            daemon(etcd, "rejoin", "r0", port, folder("hicache-cluster-slab-", true), ownL3);
            daemon(etcd, "rejoin", "r1", freePort(), folder("hicache-cluster-slab-", true));
            try (ClusterPageStore store = client(etcd, "rejoin")) {
                await(() -> store.membership().view().members().size() == 2, Duration.ofSeconds(10), "2 members");
                List<StoreKey> keys = keys(200, 4);
                assertEquals(200, put(store, keys).successCount());
                List<StoreKey> mine = keys.stream()
                        .filter(k -> ownerOf(store, k).equals("r0"))
                        .toList();
                // r0 writes its pages behind to its own file store: wait until it has, then SIGKILL it
                try (RemotePageStore r0 = RemotePageStore.open(RemoteStoreConfig.local(port, ""))) {
                    await(
                            () -> metric(r0, "hicache_server_write_behind_pages_total") >= mine.size()
                                    && metric(r0, "hicache_server_write_behind_pending_pages") == 0,
                            Duration.ofSeconds(20),
                            "r0 wrote its pages behind");
                }
                daemons.get("r0").kill();
                await(() -> store.membership().view().members().size() == 1, Duration.ofSeconds(6), "r0 left");
                // the same id and port, its slab new, its L3 the same folder: a new epoch that owns the same slots
                daemon(etcd, "rejoin", "r0", port, folder("hicache-cluster-slab-", true), ownL3);
                await(() -> store.membership().view().members().size() == 2, Duration.ofSeconds(10), "r0 rejoined");
                BatchResult r = get(store, mine);
                assertEquals(mine.size(), r.count(PageStatus.OK), "served from what its L3 kept: " + r);
            }
        }
    }

    @Test
    void aSharedL3ServesADeadMembersPagesFromTheSlotsNextOwner() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            // the shared L3: a daemon of its own (outside the cluster) on a file store, which every member uses as
            // its L3 through the remote store; an S3 bucket would do the same
            int l3Port = freePort();
            ChildJvm l3 = ChildJvm.start(
                    ClusterChildDaemon.class,
                    List.of(
                            "server.port=" + l3Port,
                            "server.metrics-port=-1",
                            "server.host-dir=" + folder("hicache-cluster-slab-", true),
                            "server.host-size=64MiB",
                            "server.store=file",
                            "file.root=" + folder("hicache-cluster-l3-", false).resolve("store")));
            daemons.put("l3", l3);
            assertTrue(l3.awaitLine("port ", 60, TimeUnit.SECONDS), () -> "the L3 daemon: " + l3.lines());
            for (int i = 0; i < 3; i++) {
                daemon(
                        etcd,
                        "shared",
                        "s" + i,
                        freePort(),
                        folder("hicache-cluster-slab-", true),
                        "server.store=remote",
                        "remote.port=" + l3Port);
            }
            try (ClusterPageStore store = client(etcd, "shared");
                    RemotePageStore shared = RemotePageStore.open(RemoteStoreConfig.local(l3Port, ""))) {
                await(() -> store.membership().view().members().size() == 3, Duration.ofSeconds(10), "3 members");
                List<StoreKey> keys = keys(300, 3);
                assertEquals(300, put(store, keys).successCount());
                List<StoreKey> lost = keys.stream()
                        .filter(k -> ownerOf(store, k).equals("s0"))
                        .toList();
                // each member writes its pages behind to the shared L3: wait until all are there
                await(
                        () -> {
                            try {
                                return shared.leadingHits(keys, Deadline.after(DEADLINE))
                                                .get()
                                        == 300;
                            } catch (Exception e) {
                                return false;
                            }
                        },
                        Duration.ofSeconds(20),
                        "every page written behind to the shared L3");
                daemons.get("s0").kill();
                await(() -> store.membership().view().members().size() == 2, Duration.ofSeconds(6), "s0 left");
                BatchResult r = get(store, lost);
                assertEquals(lost.size(), r.count(PageStatus.OK), "the next owners read them through: " + r);
                assertEquals(300, get(store, keys).count(PageStatus.OK));
            }
        }
    }
}
