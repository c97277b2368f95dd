package io.hicache.architecture;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The layout the architecture test enforces, in one table: every package of main code, the module that holds it, its
 * rank in the module's layer order, and whether other modules may use it (API or SPI) or not (internal). Plus which
 * module may depend on which. docs/architecture.md draws the same graph; change both together.
 */
final class Layout {
    /** One package of main code. A class may use packages of its own module of the same or a lower rank. */
    record Pkg(String name, String module, int rank, boolean api) {
    }

    static final List<Pkg> PACKAGES = List.of(
            // hicache-core, bottom up
            pkg("io.hicache.core.util", "hicache-core", 0, true),
            pkg("io.hicache.core", "hicache-core", 1, true),
            pkg("io.hicache.core.config", "hicache-core", 2, true),
            pkg("io.hicache.core.page", "hicache-core", 2, true),
            pkg("io.hicache.core.key", "hicache-core", 3, true),
            pkg("io.hicache.core.usage", "hicache-core", 3, true),
            pkg("io.hicache.core.store", "hicache-core", 4, true),
            pkg("io.hicache.core.memory", "hicache-core", 4, true),
            pkg("io.hicache.core.tree", "hicache-core", 4, false),
            pkg("io.hicache.core.store.memory", "hicache-core", 5, true),
            pkg("io.hicache.core.memory.emulated", "hicache-core", 5, true),
            pkg("io.hicache.core.memory.host", "hicache-core", 5, true),
            pkg("io.hicache.core.cache", "hicache-core", 6, true),
            // hicache-cuda
            pkg("io.hicache.cuda", "hicache-cuda", 0, true),
            pkg("io.hicache.cuda.kit", "hicache-cuda", 1, true), // the CUDA kits, in the test jar
            // hicache-testkit
            pkg("io.hicache.testkit", "hicache-testkit", 0, true),
            // storage-file
            pkg("io.hicache.storage.file", "storage-file", 0, true),
            // storage-rocksdb
            pkg("io.hicache.storage.rocksdb", "storage-rocksdb", 0, true),
            // storage-s3
            pkg("io.hicache.storage.s3.client", "storage-s3", 0, true),
            pkg("io.hicache.storage.s3", "storage-s3", 1, true),
            // storage-nixl
            pkg("io.hicache.storage.nixl.spi", "storage-nixl", 0, true),
            pkg("io.hicache.storage.nixl.posix", "storage-nixl", 1, false),
            pkg("io.hicache.storage.nixl.obj", "storage-nixl", 1, false),
            pkg("io.hicache.storage.nixl", "storage-nixl", 2, true),
            // storage-remote
            pkg("io.hicache.storage.remote.protocol", "storage-remote", 0, true),
            pkg("io.hicache.storage.remote", "storage-remote", 1, true),
            // transfer
            pkg("io.hicache.transfer.spi", "transfer", 0, true),
            pkg("io.hicache.transfer.frame", "transfer", 0, false),
            pkg("io.hicache.transfer.control", "transfer", 1, false),
            pkg("io.hicache.transfer.tcp", "transfer", 1, false),
            pkg("io.hicache.transfer.shm", "transfer", 1, false),
            pkg("io.hicache.transfer", "transfer", 2, true),
            pkg("io.hicache.transfer.pd", "transfer", 3, true),
            // server
            pkg("io.hicache.server.daemon", "server", 0, true),
            // hicache-cli
            pkg("io.hicache.cli", "hicache-cli", 0, true),
            // hicache-bench
            pkg("io.hicache.bench", "hicache-bench", 0, false),
            pkg("io.hicache.bench.server", "hicache-bench", 1, false));

    /** Which modules each module's main code may use (besides itself); the POMs declare the same edges. */
    static final Map<String, Set<String>> MODULE_DEPENDENCIES = Map.ofEntries(
            Map.entry("hicache-core", Set.of()),
            Map.entry("hicache-cuda", Set.of("hicache-core")),
            Map.entry("hicache-testkit", Set.of("hicache-core")),
            Map.entry("storage-file", Set.of("hicache-core")),
            Map.entry("storage-rocksdb", Set.of("hicache-core", "storage-file")),
            Map.entry("storage-s3", Set.of("hicache-core")),
            Map.entry("storage-nixl", Set.of("hicache-core", "storage-s3")),
            Map.entry("storage-remote", Set.of("hicache-core")),
            Map.entry("transfer", Set.of("hicache-core")),
            Map.entry("server", Set.of("hicache-core", "storage-remote")),
            Map.entry("hicache-cli", Set.of("hicache-core", "hicache-testkit", "server")),
            Map.entry("hicache-bench", Set.of("hicache-core", "hicache-cuda", "hicache-testkit", "storage-file", "storage-rocksdb",
                    "storage-s3", "storage-nixl", "storage-remote", "transfer", "server", "hicache-cli")));

    /**
     * Internal packages a module may use all the same, each with its reason. The bench measures the radix tree on its
     * own, below the cache's facade, as a microbenchmark would inside the module.
     */
    static final Map<String, Set<String>> INTERNAL_USE_ALLOWED = Map.of(
            "hicache-bench", Set.of("io.hicache.core.tree"));

    private Layout() {
    }

    private static Pkg pkg(String name, String module, int rank, boolean api) {
        return new Pkg(name, module, rank, api);
    }

    /** The entry of {@code packageName}, if the table has one. */
    static Optional<Pkg> find(String packageName) {
        return PACKAGES.stream().filter(p -> p.name().equals(packageName)).findFirst();
    }
}
