package io.hicache.storage.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Settings;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.store.PageStores;
import io.hicache.core.store.StoreConfig;
import io.hicache.storage.s3.client.S3Config;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Opening the S3 store: what fails at start-up, and how it says so. */
class S3PageStoreTest {
    @TempDir
    static Path dir;

    static LocalS3 server;

    @BeforeAll
    static void startServer() throws Exception {
        server = new LocalS3(dir, "hicache-open");
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    @Test
    void aMissingBucketFailsAtOpenNamingIt() {
        var e = assertThrows(HiCacheException.class, () -> S3PageStore.open(server.config("no-such-bucket")));
        assertEquals(ErrorCode.STORE_UNAVAILABLE, e.code());
        assertTrue(
                e.getMessage().contains("'no-such-bucket'") && e.getMessage().contains("does not exist"),
                e.getMessage());
    }

    @Test
    void wrongCredentialsFailAtOpenSayingWhichSettings() {
        S3Config bad = S3Config.local(server.endpoint(), "hicache-open", LocalS3.ACCESS_KEY, "wrong-secret");
        var e = assertThrows(HiCacheException.class, () -> S3PageStore.open(bad));
        assertEquals(ErrorCode.STORE_UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("refused") && e.getMessage().contains("s3.secret-key"), e.getMessage());
    }

    @Test
    void anUnreachableServiceFailsAtOpenPromptly() throws Exception {
        int closedPort;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            closedPort = s.getLocalPort();
        }
        S3Config nowhere = S3Config.local(
                        URI.create("http://127.0.0.1:" + closedPort),
                        "hicache-open",
                        LocalS3.ACCESS_KEY,
                        LocalS3.SECRET_KEY)
                .withTimeouts(Duration.ofMillis(500), 2);
        long start = System.nanoTime();
        var e = assertThrows(HiCacheException.class, () -> S3PageStore.open(nowhere));
        assertTrue(Duration.ofNanos(System.nanoTime() - start).toSeconds() < 10, "took too long");
        assertTrue(e.getMessage().contains("cannot reach"), e.getMessage());
    }

    @Test
    void settingsAreCheckedWithTheirNames() {
        var missing = assertThrows(HiCacheException.class, () -> S3Config.from(Settings.empty()));
        assertEquals(ErrorCode.CONFIG_INVALID, missing.code());
        assertTrue(missing.getMessage().contains("s3.bucket"), missing.getMessage());
        var prefix = assertThrows(
                HiCacheException.class,
                () -> S3Config.from(Settings.builder()
                        .flag("s3.bucket", "b-1")
                        .flag("s3.prefix", "no-slash")
                        .build()));
        assertTrue(prefix.getMessage().contains("s3.prefix"), prefix.getMessage());
        var bucket = assertThrows(
                HiCacheException.class,
                () -> S3Config.from(
                        Settings.builder().flag("s3.bucket", "Bad_Bucket").build()));
        assertTrue(bucket.getMessage().contains("not a valid bucket name"), bucket.getMessage());
        var keys = assertThrows(
                HiCacheException.class,
                () -> S3Config.from(Settings.builder()
                        .flag("s3.bucket", "b-1")
                        .flag("s3.access-key", "only-half")
                        .build()));
        assertTrue(keys.getMessage().contains("go together"), keys.getMessage());
        S3Config ok = S3Config.from(Settings.builder()
                .flag("s3.bucket", "b-1")
                .flag("s3.access-key", "AK")
                .flag("s3.secret-key", "very-secret")
                .build());
        assertTrue(!ok.toString().contains("very-secret"), "the secret is printed: " + ok);
    }

    @Test
    void theStoreIsFoundByNameAndNamesObjectsWithinItsPrefix() {
        Settings settings = Settings.builder()
                .flag("s3.bucket", "hicache-open")
                .flag("s3.endpoint", server.endpoint().toString())
                .flag("s3.path-style", "true")
                .flag("s3.access-key", LocalS3.ACCESS_KEY)
                .flag("s3.secret-key", LocalS3.SECRET_KEY)
                .flag("s3.prefix", "team-a/kv/")
                .build();
        try (var store = (S3PageStore) PageStores.open(new StoreConfig("s3", settings))) {
            Namespace ns = Namespace.of("../../../etc", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
            String key = store.objectKey(ns.key(PageHash.fromHex("ab".repeat(32))));
            assertEquals("team-a/kv/" + ns.id() + "/" + "ab".repeat(32), key);
            assertTrue(store.location().contains("s3://hicache-open/team-a/kv/"), store.location());
        }
    }
}
