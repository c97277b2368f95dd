package io.hicache.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.cluster.etcd.EtcdGateway;
import io.hicache.core.HiCacheException;
import io.hicache.testkit.EtcdProcess;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * Issue 39, part 1 and 3, against a real etcd: members register under leases, leave at once on close and within the
 * TTL when they die; clients see every change; with etcd away they keep the last view, and catch up when it returns.
 */
class MembershipTest {
    private static ClusterConfig config(EtcdProcess etcd, String name) {
        return new ClusterConfig(etcd.endpoints(), name, Duration.ofSeconds(2), Duration.ofSeconds(2), 1);
    }

    private static ClusterMember member(String id, int port) {
        return new ClusterMember(id, "127.0.0.1", port, 1L << 30, System.currentTimeMillis());
    }

    private static void await(BooleanSupplier condition, Duration timeout, String what) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, what);
            Thread.sleep(20);
        }
    }

    private static List<String> ids(Membership m) {
        return m.view().members().stream().map(ClusterMember::id).toList();
    }

    @Test
    void membersJoinAndLeaveAndEveryClientSeesIt() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            ClusterConfig c = config(etcd, "join-leave");
            try (Membership watcher = Membership.open(c)) {
                assertEquals(List.of(), ids(watcher));
                MemberRegistration a = MemberRegistration.start(c, member("a", 7001));
                MemberRegistration b = MemberRegistration.start(c, member("b", 7002));
                await(() -> ids(watcher).equals(List.of("a", "b")), Duration.ofSeconds(5), "both joined");
                assertTrue(a.registered() && b.registered());
                try (Membership late = Membership.open(c)) {
                    assertEquals(List.of("a", "b"), ids(late), "a client opening later reads them at once");
                }
                a.close(); // a graceful stop revokes the lease: gone at once, not after the TTL
                long left = System.nanoTime();
                await(() -> ids(watcher).equals(List.of("b")), Duration.ofSeconds(1), "a left at once");
                assertTrue(System.nanoTime() - left < Duration.ofMillis(1500).toNanos());
                b.close();
                await(() -> ids(watcher).isEmpty(), Duration.ofSeconds(1), "b left");
            }
        }
    }

    @Test
    void aMemberThatStopsRenewingIsGoneWithinItsTtl() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start();
                EtcdGateway raw = new EtcdGateway(etcd.endpoints(), Duration.ofSeconds(2))) {
            ClusterConfig c = config(etcd, "dies");
            // what a daemon killed right after registering leaves: its record under a lease nobody renews
            long lease = raw.grant(2);
            raw.put(c.membersPrefix() + "dead", MemberRecords.encode(member("dead", 7003)), lease);
            try (Membership watcher = Membership.open(c)) {
                assertEquals(List.of("dead"), ids(watcher));
                long start = System.nanoTime();
                await(() -> ids(watcher).isEmpty(), Duration.ofSeconds(5), "the record expired with its lease");
                assertTrue(
                        System.nanoTime() - start < Duration.ofMillis(3500).toNanos(),
                        "within the TTL (2 s) and a bit");
            }
        }
    }

    @Test
    void withEtcdAwayClientsKeepTheLastViewAndDaemonsRegisterAgainWhenItReturns() throws Exception {
        try (EtcdProcess etcd = EtcdProcess.start()) {
            ClusterConfig c = config(etcd, "outage");
            try (Membership watcher = Membership.open(c);
                    MemberRegistration a = MemberRegistration.start(c, member("a", 7001))) {
                await(() -> ids(watcher).equals(List.of("a")), Duration.ofSeconds(5), "a joined");
                etcd.stop();
                await(() -> !watcher.etcdReachable(), Duration.ofSeconds(10), "the outage is noticed");
                assertEquals(List.of("a"), ids(watcher), "the last view stays in force");
                assertTrue(watcher.etcdUnreachableSinceMillis() > 0);
                Thread.sleep(2500); // longer than a's lease: etcd expires it once it is back
                etcd.restart();
                await(watcher::etcdReachable, Duration.ofSeconds(10), "etcd answers again");
                await(
                        () -> a.registered() && ids(watcher).equals(List.of("a")),
                        Duration.ofSeconds(15),
                        "a is registered again and seen");
            }
        }
    }

    @Test
    void aClusterThatCannotBeReadIsAClearError() {
        ClusterConfig c = new ClusterConfig(
                List.of(URI.create("http://127.0.0.1:1")), "none", Duration.ofSeconds(2), Duration.ofMillis(500), 1);
        HiCacheException e = assertThrows(HiCacheException.class, () -> Membership.open(c));
        assertTrue(
                e.getMessage().contains("cannot read cluster 'none' from etcd at [http://127.0.0.1:1]"), e::getMessage);
        assertThrows(
                IllegalArgumentException.class,
                () -> new ClusterConfig(
                        List.of(URI.create("http://x:1")),
                        "bad name",
                        Duration.ofSeconds(2),
                        Duration.ofSeconds(1),
                        1));
        assertThrows(
                IllegalArgumentException.class,
                () -> new ClusterConfig(
                        List.of(URI.create("http://x:1")), "n", Duration.ofMillis(1500), Duration.ofSeconds(1), 1));
        assertFalse(ClusterConfig.requested(io.hicache.core.config.Settings.empty()));
    }
}
