package io.hicache.storage.s3;

import io.hicache.storage.s3.client.S3Config;
import java.net.URI;
import java.nio.file.Path;
import java.util.Properties;
import org.gaul.s3proxy.BlobStores;
import org.gaul.s3proxy.S3Proxy;
import org.gaul.s3proxy.auth.AuthenticationType;
import org.gaul.s3proxy.blobstore.BlobStore;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * A real S3 server for tests: S3Proxy inside the test JVM on 127.0.0.1, with SigV4 authentication, keeping objects
 * in a folder (so a server stopped and started again on the same port still has them). Not thread-safe.
 */
public final class LocalS3 implements AutoCloseable {
    public static final String ACCESS_KEY = "hicache-test";
    public static final String SECRET_KEY = "hicache-test-secret";

    private final Path dir;
    private S3Proxy proxy;
    private int port;

    /** Starts a server on a free port with objects in {@code dir}, and creates {@code buckets}. */
    public LocalS3(Path dir, String... buckets) throws Exception {
        this.dir = dir;
        start(0);
        try (S3Client client = client()) {
            for (String bucket : buckets) {
                client.createBucket(b -> b.bucket(bucket));
            }
        }
    }

    /** Starts (again) on {@code port}, 0 for any free one. */
    public void start(int wanted) throws Exception {
        Properties p = new Properties();
        p.setProperty("jclouds.filesystem.basedir", dir.toString());
        p.setProperty("jclouds.identity", ACCESS_KEY);
        p.setProperty("jclouds.credential", SECRET_KEY);
        BlobStore blobs = BlobStores.create("filesystem", p);
        proxy = S3Proxy.builder()
                .blobStore(blobs)
                .endpoint(URI.create("http://127.0.0.1:" + wanted))
                .awsAuthentication(AuthenticationType.AWS_V2_OR_V4, ACCESS_KEY, SECRET_KEY)
                .ignoreUnknownHeaders(true)
                .stopTimeout(0)
                .build();
        proxy.start();
        while (!"STARTED".equals(proxy.getState())) {
            Thread.sleep(5);
        }
        port = proxy.getPort();
    }

    /** Stops the server; connections in flight are cut. */
    public void stop() throws Exception {
        if (proxy != null) {
            proxy.stop();
            proxy = null;
        }
    }

    public int port() {
        return port;
    }

    public URI endpoint() {
        return URI.create("http://127.0.0.1:" + port);
    }

    /** A store's configuration for {@code bucket} on this server. */
    public S3Config config(String bucket) {
        return S3Config.local(endpoint(), bucket, ACCESS_KEY, SECRET_KEY);
    }

    /** A plain synchronous client on this server, for setting up and damaging things. */
    public S3Client client() {
        return S3Client.builder()
                .region(Region.US_EAST_1)
                .endpointOverride(endpoint())
                .forcePathStyle(true)
                .credentialsProvider(
                        StaticCredentialsProvider.create(AwsBasicCredentials.create(ACCESS_KEY, SECRET_KEY)))
                .build();
    }

    @Override
    public void close() {
        try {
            stop();
        } catch (Exception e) {
            throw new IllegalStateException("cannot stop S3Proxy", e);
        }
    }
}
