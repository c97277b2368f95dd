package io.hicache.server.daemon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.cluster.ClusterConfig;
import io.hicache.cluster.ClusterPageStore;
import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.PageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.EtcdProcess;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PagePattern;
import io.hicache.testkit.PageStoreConformanceKit;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The conformance kit against the {@code cluster} store (issue 39): a real etcd and three daemons on loopback, each
 * page at its slot's owner. The kit sees one store; every batch it sends is split over the three.
 */
class ClusterPageStoreConformanceTest extends PageStoreConformanceKit {
    static EtcdProcess etcd;
    static final List<TestDaemon> members = new ArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        etcd = EtcdProcess.start();
        for (int i = 0; i < 3; i++) {
            members.add(TestDaemon.start(Map.of(
                    "server.store", "none",
                    "cluster.etcd", etcd.endpoint().toString(),
                    "cluster.name", "kit",
                    "cluster.lease-ttl", "2s")));
        }
    }

    @AfterAll
    static void stop() throws Exception {
        for (TestDaemon d : members) {
            d.close();
        }
        members.clear();
        if (etcd != null) {
            etcd.close();
        }
    }

    /** Flips the page in every member that holds it: with one replica, the one owner. */
    @Override
    protected Optional<PageCorrupter> corrupter() {
        return Optional.of((store, key) -> {
            for (TestDaemon d : members) {
                d.flipInSlab(key);
            }
        });
    }

    /**
     * With two replicas, a copy that fails its checksum is removed from its member and the other copy is served: the
     * cluster asks the next replica on CORRUPT as it does on a failure (issue 40, part 2).
     */
    @Test
    void aCorruptReplicaIsRemovedAndTheOtherCopyIsServed() throws Exception {
        try (ClusterPageStore store = openStore(2);
                Arena arena = Arena.ofShared()) {
            StoreKey key = Namespace.builder("cluster-corrupt-" + UUID.randomUUID())
                    .build()
                    .key(PageHash.fromBytes(new byte[32], 0));
            MemorySegment page = arena.allocate(16_384);
            PagePattern.fill(page, key);
            assertEquals(
                    PageStatus.OK,
                    store.put(PageBatch.of(List.of(key), List.of(page)), Deadline.after(Duration.ofSeconds(10)))
                            .get()
                            .status(0));
            assertEquals(2, members.stream().filter(d -> d.holds(key)).count(), "two replicas");
            // Damage the copy of the owner asked first.
            int firstPort =
                    store.membership().view().placement().ownerOf(key.hash()).port();
            TestDaemon first = members.stream()
                    .filter(d -> d.port() == firstPort)
                    .findFirst()
                    .orElseThrow();
            TestDaemon second = members.stream()
                    .filter(d -> d != first && d.holds(key))
                    .findFirst()
                    .orElseThrow();
            assertTrue(first.flipInSlab(key));
            MemorySegment target = arena.allocate(16_384);
            BatchResult got = store.get(
                            PageBatch.of(List.of(key), List.of(target)), Deadline.after(Duration.ofSeconds(10)))
                    .get();
            assertEquals(PageStatus.OK, got.status(0), got::toString);
            assertTrue(PagePattern.matches(target, key), "the other replica's bytes, not the damaged ones");
            assertFalse(first.holds(key), "the corrupt copy was removed from its member");
            assertTrue(second.holds(key), "the good copy stays");
        }
    }

    @Override
    protected PageStore openStore() throws Exception {
        return openStore(1);
    }

    private static ClusterPageStore openStore(int replicas) throws Exception {
        ClusterPageStore store = ClusterPageStore.open(
                new ClusterConfig(etcd.endpoints(), "kit", Duration.ofSeconds(2), Duration.ofSeconds(2), replicas),
                RemoteStoreConfig.local(1, ""));
        long end = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (store.membership().view().members().size() < 3 && System.nanoTime() < end) {
            Thread.sleep(20);
        }
        return store;
    }
}
