package io.hicache.storage.file;

import io.hicache.testkit.PageStoreCrashKit;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Nested;

/** The file store, with fsync, killed 20 times in the middle of writing. */
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
}
