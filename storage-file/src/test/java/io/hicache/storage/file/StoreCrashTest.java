package io.hicache.storage.file;

import io.hicache.testkit.PageStoreCrashKit;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Nested;

/** Both stores, with fsync, killed 20 times each in the middle of writing. */
class StoreCrashTest {
    @Nested
    class File extends PageStoreCrashKit {
        @Override
        protected String storeName() {
            return "file";
        }

        @Override
        protected Map<String, String> settings(Path dir) {
            return Map.of("file.root", dir.resolve("store").toString(), "file.fsync", "true", "file.capacity", "4GiB");
        }
    }

    @Nested
    class RocksDb extends PageStoreCrashKit {
        @Override
        protected String storeName() {
            return "rocksdb";
        }

        @Override
        protected Map<String, String> settings(Path dir) {
            return Map.of("rocksdb.root", dir.resolve("store").toString(), "rocksdb.fsync", "true", "rocksdb.capacity",
                    "4GiB");
        }
    }
}
