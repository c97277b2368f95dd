package io.hicache.architecture;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The layout the architecture test enforces, in one table: every package of main code (and of the three kits shipped in
 * test jars), the module that holds it, its rank in the module's layer order, and its kind. Plus which module may
 * depend on which. docs/architecture.md draws the same graph; change both together.
 */
final class Layout {
    /** What other packages may do with a package. */
    enum Kind {
        /** API or SPI: any package of a module that may depend on this one may use it. */
        API,
        /** Internal: only packages of its own module (of a higher or the same rank) may use it. */
        INTERNAL,
        /**
         * A plug-in found by {@code ServiceLoader}: internal, and no other package uses it, not even of its own module,
         * so the module's engine cannot come to depend on one plug-in (an RDMA transport, another NIXL plugin can be
         * added without touching it).
         */
        PLUGIN
    }

    /** One package. A class may use packages of its own module of the same or a lower rank (plug-ins excepted). */
    record Pkg(String name, String module, int rank, Kind kind) {}

    static final List<Pkg> PACKAGES = List.of(
            // hicache-core, bottom up
            pkg("io.hicache.core.util", "hicache-core", 0, Kind.API),
            pkg("io.hicache.core", "hicache-core", 1, Kind.API),
            pkg("io.hicache.core.config", "hicache-core", 2, Kind.API),
            pkg("io.hicache.core.page", "hicache-core", 2, Kind.API),
            pkg("io.hicache.core.rank", "hicache-core", 2, Kind.API),
            pkg("io.hicache.core.key", "hicache-core", 3, Kind.API),
            pkg("io.hicache.core.usage", "hicache-core", 3, Kind.API),
            pkg("io.hicache.core.store", "hicache-core", 4, Kind.API),
            pkg("io.hicache.core.memory", "hicache-core", 4, Kind.API),
            pkg("io.hicache.core.tree", "hicache-core", 4, Kind.INTERNAL),
            pkg("io.hicache.core.events", "hicache-core", 4, Kind.API),
            pkg("io.hicache.core.store.memory", "hicache-core", 5, Kind.API),
            pkg("io.hicache.core.memory.emulated", "hicache-core", 5, Kind.API),
            pkg("io.hicache.core.memory.host", "hicache-core", 5, Kind.API),
            pkg("io.hicache.core.cache", "hicache-core", 6, Kind.API),
            // hicache-cuda, and the CUDA kits in its test jar
            pkg("io.hicache.cuda", "hicache-cuda", 0, Kind.API),
            pkg("io.hicache.cuda.kit", "hicache-cuda-kit", 0, Kind.API),
            // hicache-testkit
            pkg("io.hicache.testkit", "hicache-testkit", 0, Kind.API),
            // storage-file, storage-rocksdb
            pkg("io.hicache.storage.file", "storage-file", 0, Kind.API),
            pkg("io.hicache.storage.rocksdb", "storage-rocksdb", 0, Kind.API),
            // storage-s3
            pkg("io.hicache.storage.s3.client", "storage-s3", 0, Kind.API),
            pkg("io.hicache.storage.s3", "storage-s3", 1, Kind.API),
            // storage-nixl
            pkg("io.hicache.storage.nixl.spi", "storage-nixl", 0, Kind.API),
            pkg("io.hicache.storage.nixl.posix", "storage-nixl", 1, Kind.PLUGIN),
            pkg("io.hicache.storage.nixl.obj", "storage-nixl", 1, Kind.PLUGIN),
            pkg("io.hicache.storage.nixl", "storage-nixl", 2, Kind.API),
            // storage-remote
            pkg("io.hicache.storage.remote.protocol", "storage-remote", 0, Kind.API),
            pkg("io.hicache.storage.remote", "storage-remote", 1, Kind.API),
            // storage-crypt
            pkg("io.hicache.storage.crypt", "storage-crypt", 0, Kind.API),
            // cluster: etcd's gateway below membership, placement and the cluster store
            pkg("io.hicache.cluster.etcd", "cluster", 0, Kind.INTERNAL),
            pkg("io.hicache.cluster", "cluster", 1, Kind.API),
            // events-zmq
            pkg("io.hicache.events.zmq", "events-zmq", 0, Kind.API),
            // transfer: the SPI below everything, the engine above the control connection, never on a transport
            pkg("io.hicache.transfer.spi", "transfer", 0, Kind.API),
            pkg("io.hicache.transfer.frame", "transfer", 1, Kind.INTERNAL),
            pkg("io.hicache.transfer.control", "transfer", 2, Kind.INTERNAL),
            pkg("io.hicache.transfer.tcp", "transfer", 2, Kind.PLUGIN),
            pkg("io.hicache.transfer.shm", "transfer", 2, Kind.PLUGIN),
            pkg("io.hicache.transfer.rank", "transfer", 2, Kind.API),
            pkg("io.hicache.transfer", "transfer", 3, Kind.API),
            pkg("io.hicache.transfer.staged", "transfer", 4, Kind.API),
            pkg("io.hicache.transfer.pd", "transfer", 5, Kind.API),
            pkg("io.hicache.transfer.kit", "transfer-kit", 0, Kind.API),
            // transfer-cuda: the cuda-ipc transport (a plug-in), and its kit in the test jar
            pkg("io.hicache.transfer.cuda", "transfer-cuda", 0, Kind.PLUGIN),
            pkg("io.hicache.transfer.cuda.kit", "transfer-cuda-kit", 0, Kind.API),
            // transfer-ucx: the ucx transport (a plug-in)
            pkg("io.hicache.transfer.ucx", "transfer-ucx", 0, Kind.PLUGIN),
            // server
            pkg("io.hicache.server.daemon", "server", 0, Kind.API),
            // hicache-cli
            pkg("io.hicache.cli", "hicache-cli", 0, Kind.API),
            // hicache-bench
            pkg("io.hicache.bench", "hicache-bench", 0, Kind.INTERNAL),
            pkg("io.hicache.bench.server", "hicache-bench", 1, Kind.INTERNAL));

    /**
     * Which modules each module's main code may use (besides itself): the compile-scope HiCache dependencies of its POM,
     * exactly ({@code ArchitectureTest} compares). {@code hicache-cuda-kit} and {@code transfer-kit} are the test jars of
     * hicache-cuda and transfer.
     */
    static final Map<String, Set<String>> MODULE_DEPENDENCIES = Map.ofEntries(
            Map.entry("hicache-core", Set.of()),
            Map.entry("hicache-cuda", Set.of("hicache-core")),
            Map.entry("hicache-cuda-kit", Set.of("hicache-core", "hicache-cuda", "hicache-testkit")),
            Map.entry("hicache-testkit", Set.of("hicache-core")),
            Map.entry("storage-file", Set.of("hicache-core")),
            Map.entry("storage-rocksdb", Set.of("hicache-core", "storage-file")),
            Map.entry("storage-s3", Set.of("hicache-core")),
            Map.entry("storage-nixl", Set.of("hicache-core", "storage-s3")),
            Map.entry("storage-remote", Set.of("hicache-core")),
            Map.entry("storage-crypt", Set.of("hicache-core")),
            Map.entry("cluster", Set.of("hicache-core", "storage-remote")),
            Map.entry("events-zmq", Set.of("hicache-core")),
            Map.entry("transfer", Set.of("hicache-core")),
            Map.entry("transfer-kit", Set.of("hicache-core", "transfer", "hicache-testkit")),
            Map.entry("transfer-cuda", Set.of("hicache-core", "transfer", "hicache-cuda")),
            Map.entry("transfer-ucx", Set.of("hicache-core", "transfer")),
            Map.entry(
                    "transfer-cuda-kit",
                    Set.of(
                            "hicache-core",
                            "transfer",
                            "hicache-cuda",
                            "transfer-cuda",
                            "hicache-testkit",
                            "transfer-kit")),
            Map.entry("server", Set.of("hicache-core", "storage-remote", "cluster")),
            Map.entry(
                    "hicache-cli",
                    Set.of("hicache-core", "hicache-testkit", "server", "storage-remote", "cluster", "transfer")),
            Map.entry(
                    "hicache-bench",
                    Set.of(
                            "hicache-core",
                            "hicache-cuda",
                            "hicache-cuda-kit",
                            "hicache-testkit",
                            "storage-file",
                            "storage-rocksdb",
                            "storage-s3",
                            "storage-nixl",
                            "storage-remote",
                            "storage-crypt",
                            "cluster",
                            "transfer",
                            "server",
                            "hicache-cli",
                            "transfer-cuda",
                            "transfer-cuda-kit",
                            "transfer-ucx",
                            "transfer-kit")));

    /**
     * Internal packages a module may use all the same, each with its reason. The bench measures the radix tree on its
     * own, below the cache's facade, as a microbenchmark would inside the module.
     */
    static final Map<String, Set<String>> INTERNAL_USE_ALLOWED =
            Map.of("hicache-bench", Set.of("io.hicache.core.tree"));

    private Layout() {}

    private static Pkg pkg(String name, String module, int rank, Kind kind) {
        return new Pkg(name, module, rank, kind);
    }

    /** The entry of {@code packageName}, if the table has one. */
    static Optional<Pkg> find(String packageName) {
        return PACKAGES.stream().filter(p -> p.name().equals(packageName)).findFirst();
    }
}
