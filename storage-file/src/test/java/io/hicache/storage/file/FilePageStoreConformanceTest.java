package io.hicache.storage.file;

import io.hicache.core.store.PageStore;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.io.TempDir;

/** The conformance kit against the file store: buffered, with direct I/O, and with fsync. */
class FilePageStoreConformanceTest {
    /** Small enough for the kit's eviction case to fill it three times over. */
    static final long CAPACITY = 48L << 20;

    /** Flips a byte in the middle of the page's file, behind the store's back. */
    static final PageCorrupter FLIP_A_BYTE_ON_DISK =
            (store, key) -> PageCorrupter.flipMiddleByte(((FilePageStore) store).fileOf(key));

    abstract static class Kit extends PageStoreConformanceKit {
        abstract FileStoreConfig config();

        @Override
        protected PageStore openStore() {
            return FilePageStore.open(config());
        }

        @Override
        protected Optional<PageCorrupter> corrupter() {
            return Optional.of(FLIP_A_BYTE_ON_DISK);
        }
    }

    @Nested
    class Buffered extends Kit {
        @TempDir
        static Path root;

        @Override
        FileStoreConfig config() {
            return FileStoreConfig.at(root.resolve("store")).withCapacityBytes(CAPACITY);
        }
    }

    @Nested
    class DirectIo extends Kit {
        @TempDir
        static Path root;

        @Override
        FileStoreConfig config() {
            return FileStoreConfig.at(root.resolve("store"))
                    .withCapacityBytes(CAPACITY)
                    .withDirectIo(true);
        }
    }

    @Nested
    class Fsync extends Kit {
        @TempDir
        static Path root;

        @Override
        FileStoreConfig config() {
            return FileStoreConfig.at(root.resolve("store"))
                    .withCapacityBytes(CAPACITY)
                    .withFsync(true);
        }
    }
}
