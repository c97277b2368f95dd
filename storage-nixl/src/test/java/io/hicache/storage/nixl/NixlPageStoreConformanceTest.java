package io.hicache.storage.nixl;

import io.hicache.core.store.PageStore;
import io.hicache.storage.s3.LocalS3;
import io.hicache.storage.s3.client.S3Config;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.core.sync.ResponseTransformer;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * The conformance kit against the NIXL store: the POSIX plugin over two folders (buffered, and with direct I/O), and
 * the OBJ plugin against S3Proxy, a real S3 server in this JVM on 127.0.0.1.
 */
class NixlPageStoreConformanceTest {
    /** Small enough for the kit's eviction case to fill it three times over. */
    static final long CAPACITY = 48L << 20;

    /** Flips a byte in the middle of the page's file, behind the store's back. */
    static final PageCorrupter FLIP_A_BYTE_ON_DISK =
            (store, key) -> PageCorrupter.flipMiddleByte(Path.of(((NixlPageStore) store).whereIs(key)));

    abstract static class PosixKit extends PageStoreConformanceKit {
        abstract Path root();

        abstract NixlStoreConfig adjust(NixlStoreConfig config);

        @Override
        protected PageStore openStore() {
            return NixlPageStore.open(adjust(NixlStoreConfig.posix(List.of(root().resolve("a"), root().resolve("b")))
                    .withCapacityBytes(CAPACITY)));
        }

        @Override
        protected Optional<PageCorrupter> corrupter() {
            return Optional.of(FLIP_A_BYTE_ON_DISK);
        }
    }

    @Nested
    class Posix extends PosixKit {
        @TempDir
        static Path root;

        @Override
        Path root() {
            return root;
        }

        @Override
        NixlStoreConfig adjust(NixlStoreConfig config) {
            return config;
        }
    }

    @Nested
    class PosixDirectIo extends PosixKit {
        @TempDir
        static Path root;

        @Override
        Path root() {
            return root;
        }

        @Override
        NixlStoreConfig adjust(NixlStoreConfig config) {
            return config.withDirectIo(true);
        }
    }

    @Nested
    class PosixWithoutRegistrationCache extends PosixKit {
        @TempDir
        static Path root;

        @Override
        Path root() {
            return root;
        }

        @Override
        NixlStoreConfig adjust(NixlStoreConfig config) {
            return config.withRegistrationCache(0);
        }
    }

    @Nested
    class Obj extends PageStoreConformanceKit {
        static final String BUCKET = "hicache-nixl-kit";

        @TempDir
        static Path dir;

        static LocalS3 server;

        @BeforeAll
        static void startServer() throws Exception {
            server = new LocalS3(dir, BUCKET);
        }

        @AfterAll
        static void stopServer() {
            server.close();
        }

        @Override
        protected PageStore openStore() {
            return NixlPageStore.open(NixlStoreConfig.obj(objParams(server, BUCKET)));
        }

        @Override
        protected Optional<PageCorrupter> corrupter() {
            return Optional.of((store, key) -> {
                String object = ((NixlPageStore) store).whereIs(key);
                try (S3Client client = server.client()) {
                    byte[] bytes = client.getObject(b -> b.bucket(BUCKET).key(object), ResponseTransformer.toBytes())
                            .asByteArray();
                    bytes[bytes.length / 3] ^= (byte) 0xFF;
                    client.putObject(b -> b.bucket(BUCKET).key(object), RequestBody.fromBytes(bytes));
                }
            });
        }
    }

    /** The OBJ plugin's parameters for {@code bucket} on {@code server}. */
    static Map<String, String> objParams(LocalS3 server, String bucket) {
        return Map.of(
                S3Config.BUCKET.key(),
                bucket,
                S3Config.ENDPOINT.key(),
                server.endpoint().toString(),
                S3Config.PATH_STYLE.key(),
                "true",
                S3Config.ACCESS_KEY.key(),
                LocalS3.ACCESS_KEY,
                S3Config.SECRET_KEY.key(),
                LocalS3.SECRET_KEY);
    }
}
