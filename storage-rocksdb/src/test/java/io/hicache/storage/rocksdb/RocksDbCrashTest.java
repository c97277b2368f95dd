package io.hicache.storage.rocksdb;

import io.hicache.testkit.PageStoreCrashKit;
import java.nio.file.Path;
import java.util.Map;

/** The RocksDB store, with fsync, killed 20 times in the middle of writing. */
class RocksDbCrashTest extends PageStoreCrashKit {
    @Override
    protected String storeName() {
        return "rocksdb";
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return Map.of(
                "rocksdb.root", dir.resolve("store").toString(), "rocksdb.fsync", "true", "rocksdb.capacity", "4GiB");
    }
}
