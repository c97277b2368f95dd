package io.hicache.storage.rocksdb;

import io.hicache.testkit.PageStoreCrashKit;
import java.nio.file.Path;
import java.util.Map;

/**
 * The RocksDB store with a 1 MiB memtable, so that most of the kit's batches (1 to 8 pages of 16 to 256 KiB) are
 * written once, without the log, and flushed before the put returns, and the rest go through the log: killed in the
 * middle of both, every returned put must still be there, whole, after the restart.
 */
class RocksDbWriteOnceCrashTest extends PageStoreCrashKit {
    @Override
    protected String storeName() {
        return "rocksdb";
    }

    @Override
    protected Map<String, String> settings(Path dir) {
        return Map.of(
                "rocksdb.root",
                dir.resolve("store").toString(),
                "rocksdb.write-buffer",
                "1MiB",
                "rocksdb.capacity",
                "4GiB");
    }

    @Override
    protected int kills() {
        return 10;
    }
}
