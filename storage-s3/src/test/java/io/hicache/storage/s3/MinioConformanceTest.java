package io.hicache.storage.s3;

import io.hicache.core.store.PageStore;
import io.hicache.storage.s3.client.S3Config;
import io.hicache.testkit.PageCorrupter;
import io.hicache.testkit.PageStoreConformanceKit;
import java.net.URI;
import java.util.Optional;
import org.junit.jupiter.api.BeforeAll;
import org.testcontainers.containers.MinIOContainer;
import org.testcontainers.junit.jupiter.Container;
import org.testcontainers.junit.jupiter.Testcontainers;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * The conformance kit against the S3 store on MinIO in a container. Where there is no Docker (as on the development
 * and CI machines) every case is skipped, with that reason.
 */
@Testcontainers(disabledWithoutDocker = true)
class MinioConformanceTest extends PageStoreConformanceKit {
    private static final String BUCKET = "hicache-kit";

    @Container
    static final MinIOContainer MINIO = new MinIOContainer("minio/minio:RELEASE.2023-09-04T19-57-37Z");

    @BeforeAll
    static void createBucket() {
        try (S3Client client = client()) {
            client.createBucket(b -> b.bucket(BUCKET));
        }
    }

    private static S3Client client() {
        return S3Client.builder()
                .region(Region.US_EAST_1)
                .endpointOverride(URI.create(MINIO.getS3URL()))
                .forcePathStyle(true)
                .credentialsProvider(StaticCredentialsProvider.create(
                        AwsBasicCredentials.create(MINIO.getUserName(), MINIO.getPassword())))
                .build();
    }

    @Override
    protected PageStore openStore() {
        return S3PageStore.open(
                S3Config.local(URI.create(MINIO.getS3URL()), BUCKET, MINIO.getUserName(), MINIO.getPassword()));
    }

    @Override
    protected Optional<PageCorrupter> corrupter() {
        return Optional.of((store, key) -> {
            try (S3Client client = client()) {
                S3PageStoreConformanceTest.flipAByte(client, BUCKET, ((S3PageStore) store).objectKey(key));
            }
        });
    }
}
