package io.hicache.storage.s3.client;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.time.Duration;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkServiceException;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.http.nio.netty.SdkEventLoopGroup;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.retries.api.BackoffStrategy;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.S3AsyncClientBuilder;
import software.amazon.awssdk.services.s3.model.NoSuchBucketException;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * Builds an S3 client from an S3 configuration, and checks the bucket before it is used: for the S3 store and for
 * the NIXL OBJ plugin. Stateless; the caller closes the clients it builds.
 */
public final class S3Clients {
    /**
     * One set of Netty event loops for every S3 store in the process, made on first use and never shut down (daemon
     * threads): a client that owns its loops takes two seconds to close them, and stores are opened and closed far more
     * often than that is worth.
     */
    private static final class Loops {
        static final SdkEventLoopGroup SHARED = SdkEventLoopGroup.builder()
                .numberOfThreads(Math.max(2, Runtime.getRuntime().availableProcessors()))
                .threadFactory(new DefaultThreadFactory("hicache-s3-netty", true))
                .build();
    }

    private S3Clients() {}

    /**
     * The asynchronous client: Netty connections up to {@code s3.concurrency} on the process's shared event loops,
     * each attempt bounded by
     * {@code s3.request-timeout}, the standard retry strategy (throttling, 5xx, timeouts, and answers that are not
     * HTTP, see {@code unreadableResponse}) with exponential backoff
     * and jitter from 50 ms to 2 s, up to {@code s3.max-attempts}. The SDK's own payload checksums are only used
     * where S3 requires them: the store keeps its own CRC-32C in the object's metadata, which every S3-compatible
     * service stores, whereas trailing checksums in chunked uploads are not understood everywhere.
     */
    public static S3AsyncClient build(S3Config config) {
        AwsCredentialsProvider credentials = config.accessKey().isPresent()
                ? StaticCredentialsProvider.create(AwsBasicCredentials.create(
                        config.accessKey().get(), config.secretKey().orElseThrow()))
                : DefaultCredentialsProvider.builder().build();
        S3AsyncClientBuilder builder = S3AsyncClient.builder()
                .region(Region.of(config.region()))
                .credentialsProvider(credentials)
                .forcePathStyle(config.pathStyle())
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder()
                        .eventLoopGroup(Loops.SHARED)
                        .maxConcurrency(config.concurrency())
                        .maxPendingConnectionAcquires(1 << 16)
                        .connectionTimeout(config.connectTimeout())
                        .connectionAcquisitionTimeout(config.requestTimeout().multipliedBy(config.maxAttempts()))
                        .readTimeout(config.requestTimeout())
                        .writeTimeout(config.requestTimeout())
                        .tcpKeepAlive(true))
                .overrideConfiguration(o -> o.apiCallAttemptTimeout(config.requestTimeout())
                        .retryStrategy(r -> r.maxAttempts(config.maxAttempts())
                                .retryOnException(S3Clients::unreadableResponse)
                                .backoffStrategy(
                                        BackoffStrategy.exponentialDelay(Duration.ofMillis(50), Duration.ofSeconds(2)))
                                .throttlingBackoffStrategy(BackoffStrategy.exponentialDelay(
                                        Duration.ofMillis(200), Duration.ofSeconds(5)))));
        config.endpoint().ifPresent(builder::endpointOverride);
        return builder.build();
    }

    /**
     * Whether the server's answer could not be read as HTTP: Netty's decoder reports such a response with status 999,
     * no real status (those end at 599), and the SDK does not retry it, though it is a broken exchange like a dropped
     * connection, which it does retry. s3rver, for one, can send a byte past an empty object's Content-Length when a
     * put fills the object meanwhile, which garbles the next answer on that connection.
     */
    private static boolean unreadableResponse(Throwable error) {
        return error instanceof SdkServiceException s && s.statusCode() > 599;
    }

    /**
     * Asks for the bucket, so that a missing bucket, refused or missing credentials and an unreachable service fail
     * here, each with its own message.
     */
    public static void checkBucket(S3AsyncClient s3, S3Config config) {
        String where = "bucket '" + config.bucket() + "'"
                + config.endpoint().map(e -> " at " + e).orElse(" on AWS (" + config.region() + ")");
        long waitNanos =
                config.requestTimeout().multipliedBy(config.maxAttempts() + 1).toNanos();
        try {
            s3.headBucket(b -> b.bucket(config.bucket())).get(waitNanos, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, "interrupted while checking " + where, e);
        } catch (TimeoutException e) {
            throw new HiCacheException(
                    ErrorCode.STORE_UNAVAILABLE,
                    "no answer about " + where + " within "
                            + Duration.ofNanos(waitNanos).toSeconds() + " s",
                    e);
        } catch (ExecutionException | CompletionException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            throw new HiCacheException(ErrorCode.STORE_UNAVAILABLE, explain(cause, where, config), cause);
        }
    }

    private static String explain(Throwable cause, String where, S3Config config) {
        if (cause instanceof NoSuchBucketException || (cause instanceof S3Exception s && s.statusCode() == 404)) {
            return where + " does not exist; create it, or set s3.bucket to one that does";
        }
        if (cause instanceof S3Exception s && (s.statusCode() == 403 || s.statusCode() == 401)) {
            return "access to " + where + " was refused (HTTP " + s.statusCode() + "): check "
                    + (config.accessKey().isPresent()
                            ? "s3.access-key and s3.secret-key"
                            : "the credentials the SDK's "
                                    + "default chain found (environment, profile, instance role)");
        }
        if (cause instanceof SdkClientException
                && String.valueOf(cause.getMessage()).contains("credentials")) {
            return "no credentials for " + where + ": set s3.access-key and s3.secret-key, or provide them the way the "
                    + "AWS SDK looks for them (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance role): "
                    + cause.getMessage();
        }
        return "cannot reach " + where + ": " + cause.getMessage();
    }
}
