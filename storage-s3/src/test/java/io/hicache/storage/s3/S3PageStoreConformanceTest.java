package io.hicache.storage.s3;

import io.hicache.core.store.PageStore;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.core.sync.ResponseTransformer;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/** The conformance kit against the S3 store on S3Proxy, a real S3 server in this JVM on 127.0.0.1. */
class S3PageStoreConformanceTest extends PageStoreConformanceKit {
    static final String BUCKET = "hicache-kit";

    @TempDir
    static Path dir;

    static LocalS3 server;

    @BeforeAll
    static void startServer() throws Exception {
        server = new LocalS3(dir, BUCKET);
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    @Override
    protected PageStore openStore() {
        return S3PageStore.open(server.config(BUCKET));
    }

    /** Rewrites the object with one byte flipped and its metadata (the checksum) unchanged. */
    static void flipAByte(S3Client client, String bucket, String key) {
        var object = client.getObject(b -> b.bucket(bucket).key(key), ResponseTransformer.toBytes());
        byte[] bytes = object.asByteArray();
        bytes[bytes.length / 2] ^= (byte) 0xFF;
        GetObjectResponse head = object.response();
        client.putObject(b -> b.bucket(bucket).key(key).metadata(head.metadata()), RequestBody.fromBytes(bytes));
    }

    @Override
    protected Optional<PageCorrupter> corrupter() {
        return Optional.of((store, key) -> {
            try (S3Client client = server.client()) {
                flipAByte(client, BUCKET, ((S3PageStore) store).objectKey(key));
            }
        });
    }
}
