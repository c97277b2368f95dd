package io.hicache.server.daemon;

import io.hicache.cluster.ClusterConfig;
import io.hicache.cluster.ClusterPageStore;
import io.hicache.core.store.PageStore;
import io.hicache.storage.remote.RemoteStoreConfig;
import io.hicache.testkit.EtcdProcess;
import io.hicache.testkit.PageStoreConformanceKit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

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

    @Override
    protected PageStore openStore() throws Exception {
        ClusterPageStore store = ClusterPageStore.open(
                new ClusterConfig(etcd.endpoints(), "kit", Duration.ofSeconds(2), Duration.ofSeconds(2), 1),
                RemoteStoreConfig.local(1, ""));
        long end = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (store.membership().view().members().size() < 3 && System.nanoTime() < end) {
            Thread.sleep(20);
        }
        return store;
    }
}
