package io.hicache.storage.crypt;

import io.hicache.core.config.Settings;
import io.hicache.core.store.PageStore;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.server.daemon.HiCacheServer;
import io.hicache.server.daemon.ServerConfig;
import io.hicache.storage.s3.LocalS3;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.io.TempDir;

/**
 * The conformance kit against the {@code encrypted} store over each inner store, opened by name as a user would
 * ({@code encrypted.inner}, the inner store's own settings beside it, a key file of two keys): memory, file, rocksdb,
 * nixl (POSIX plugin), s3 (S3Proxy in this JVM) and remote (a daemon in this JVM, its L3 the file store). The kit's
 * corruption case flips a byte of a page's ciphertext through the inner store, which stores it under a fresh checksum
 * of its own: only the encrypted store's authentication can catch it.
 */
class EncryptedPageStoreConformanceTest {
    /** Small enough for the kit's eviction case to fill it three times over, as the file store's own kit. */
    static final String CAPACITY = "48MiB";

    /** The kit's corruption case writes pages of 16 KiB; the byte flipped is in the middle of the ciphertext. */
    static final long KIT_PAGE_BYTES = 16 * 1024;

    static final PageCorrupter FLIP_A_CIPHERTEXT_BYTE = (store, key) -> InnerPages.flipByte(
            (EncryptedPageStore) store, key, KIT_PAGE_BYTES, SealedPageDescriptor.HEADER_BYTES + KIT_PAGE_BYTES / 2);

    abstract static class Kit extends PageStoreConformanceKit {
        /** The inner store's name and settings. */
        abstract Map<String, String> inner();

        /** A folder that lives as long as the nested class. */
        abstract Path dir();

        @Override
        protected PageStore openStore() {
            Path keyFile = dir().resolve("keys");
            if (!Files.exists(keyFile)) {
                TestKeys.write(keyFile, TestKeys.newKeys("k2026a", "k2026b"));
            }
            Settings.Builder settings = Settings.builder()
                    .flag("encrypted.key-file", keyFile.toString())
                    .flag("encrypted.active-key", "k2026b");
            inner().forEach(settings::flag);
            return PageStores.open(new StoreConfig("encrypted", settings.build()));
        }

        @Override
        protected Optional<PageCorrupter> corrupter() {
            return Optional.of(FLIP_A_CIPHERTEXT_BYTE);
        }
    }

    @Nested
    class OverMemory extends Kit {
        @TempDir
        static Path dir;

        @Override
        Map<String, String> inner() {
            return Map.of("encrypted.inner", "memory");
        }

        @Override
        Path dir() {
            return dir;
        }
    }

    @Nested
    class OverFile extends Kit {
        @TempDir
        static Path dir;

        @Override
        Map<String, String> inner() {
            return Map.of(
                    "encrypted.inner", "file", "file.root", dir.resolve("store").toString(), "file.capacity", CAPACITY);
        }

        @Override
        Path dir() {
            return dir;
        }
    }

    @Nested
    class OverFileWithDirectIo extends Kit {
        @TempDir
        static Path dir;

        @Override
        Map<String, String> inner() {
            return Map.of(
                    "encrypted.inner",
                    "file",
                    "file.root",
                    dir.resolve("store").toString(),
                    "file.capacity",
                    CAPACITY,
                    "file.direct-io",
                    "true");
        }

        @Override
        Path dir() {
            return dir;
        }
    }

    @Nested
    class OverRocksDb extends Kit {
        @TempDir
        static Path dir;

        @Override
        Map<String, String> inner() {
            return Map.of(
                    "encrypted.inner",
                    "rocksdb",
                    "rocksdb.root",
                    dir.resolve("store").toString(),
                    "rocksdb.capacity",
                    CAPACITY);
        }

        @Override
        Path dir() {
            return dir;
        }
    }

    @Nested
    class OverNixlPosix extends Kit {
        @TempDir
        static Path dir;

        @Override
        Map<String, String> inner() {
            return Map.of(
                    "encrypted.inner",
                    "nixl",
                    "nixl.plugin",
                    "POSIX",
                    "nixl.dirs",
                    dir.resolve("a") + "," + dir.resolve("b"),
                    "nixl.capacity",
                    CAPACITY);
        }

        @Override
        Path dir() {
            return dir;
        }
    }

    @Nested
    class OverS3 extends Kit {
        static final String BUCKET = "hicache-crypt-kit";

        @TempDir
        static Path dir;

        static LocalS3 server;

        @BeforeAll
        static void startServer() throws Exception {
            server = new LocalS3(Files.createDirectories(dir.resolve("s3")), BUCKET);
        }

        @AfterAll
        static void stopServer() throws Exception {
            if (server != null) {
                server.close();
            }
        }

        @Override
        Map<String, String> inner() {
            return Map.of(
                    "encrypted.inner",
                    "s3",
                    "s3.bucket",
                    BUCKET,
                    "s3.endpoint",
                    server.endpoint().toString(),
                    "s3.path-style",
                    "true",
                    "s3.access-key",
                    LocalS3.ACCESS_KEY,
                    "s3.secret-key",
                    LocalS3.SECRET_KEY);
        }

        @Override
        Path dir() {
            return dir;
        }

        /**
         * S3Proxy's filesystem backend writes a body and its metadata apart, and each put of a page seals it under a
         * fresh nonce: a get racing an overwrite can pair one put's ciphertext with another's checksum (seen once in
         * CI). Real S3 replaces an object whole.
         */
        @Override
        protected boolean tornOverwritesPossible() {
            return true;
        }
    }

    /** A daemon in this JVM on 127.0.0.1 (an ephemeral port, its slab and file store in this class's folder). */
    @Nested
    class OverRemote extends Kit {
        @TempDir
        static Path dir;

        static HiCacheServer daemon;

        @BeforeAll
        static void startDaemon() throws Exception {
            Files.createDirectories(dir.resolve("slab"));
            daemon = HiCacheServer.start(ServerConfig.from(Settings.builder()
                    .flag("server.port", "0")
                    .flag("server.metrics-port", "0")
                    .flag("server.host-dir", dir.resolve("slab").toString())
                    .flag("server.host-size", "256MiB")
                    .flag("server.shutdown-timeout", "20s")
                    .flag("file.root", dir.resolve("l3").toString())
                    .build()));
        }

        @AfterAll
        static void stopDaemon() {
            if (daemon != null) {
                daemon.close();
            }
        }

        @Override
        Map<String, String> inner() {
            return Map.of("encrypted.inner", "remote", "remote.port", Integer.toString(daemon.port()));
        }

        @Override
        Path dir() {
            return dir;
        }
    }
}
