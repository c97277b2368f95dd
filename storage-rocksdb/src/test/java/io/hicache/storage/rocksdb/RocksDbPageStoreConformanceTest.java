package io.hicache.storage.rocksdb;

import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStore;
import io.hicache.storage.file.PageId;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.io.TempDir;

/** The conformance kit against the RocksDB store, with and without fsync. */
class RocksDbPageStoreConformanceTest {
    /** As the file store's kit: room for the kit's largest case, small enough that eviction is exercised. */
    static final long CAPACITY = 48L << 20;

    abstract static class Kit extends PageStoreConformanceKit {
        abstract RocksDbStoreConfig config();

        @Override
        protected PageStore openStore() {
            return RocksDbPageStore.open(config());
        }

        @Override
        protected Optional<PageCorrupter> corrupter() {
            return Optional.of((store, key) -> flipMiddleByte((RocksDbPageStore) store, key));
        }
    }

    @Nested
    class Default extends Kit {
        @TempDir
        static Path root;

        @Override
        RocksDbStoreConfig config() {
            return RocksDbStoreConfig.at(root.resolve("store")).withCapacityBytes(CAPACITY);
        }
    }

    @Nested
    class Fsync extends Kit {
        @TempDir
        static Path root;

        @Override
        RocksDbStoreConfig config() {
            return RocksDbStoreConfig.at(root.resolve("store"))
                    .withCapacityBytes(CAPACITY)
                    .withFsync(true);
        }
    }

    /**
     * Flips one byte of the stored page's value through RocksDB itself, leaving its checksum record alone: bit rot
     * that RocksDB's own checks cannot see.
     */
    private static void flipMiddleByte(RocksDbPageStore store, StoreKey key) throws Exception {
        RocksDbHandles rocks = store.handles();
        byte[] id = PageId.of(key).toBytes();
        byte[] value = rocks.db.get(rocks.pages, id);
        if (value == null) {
            throw new IllegalArgumentException("no page stored under " + key);
        }
        value[value.length / 2] = (byte) ~value[value.length / 2];
        rocks.db.put(rocks.pages, id, value);
    }
}
