package io.hicache.storage.s3;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.page.PageFormat;
import io.hicache.core.store.AbstractPageStore;
import io.hicache.core.store.BatchResult;
import io.hicache.core.store.Capability;
import io.hicache.core.store.PageBatch;
import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageOutcome;
import io.hicache.core.store.PageStatus;
import io.hicache.core.store.StoreCapabilities;
import io.hicache.core.util.RateLimitedLog;
import io.hicache.storage.s3.client.IntoSegments;
import io.hicache.storage.s3.client.S3Clients;
import io.hicache.storage.s3.client.S3Config;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration;
import software.amazon.awssdk.core.async.AsyncRequestBody;
import software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException;
import software.amazon.awssdk.core.exception.ApiCallTimeoutException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.model.Delete;
import software.amazon.awssdk.services.s3.model.DeleteObjectsRequest;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.ObjectIdentifier;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * The {@code s3} page store: one object per page in a bucket of any S3-compatible service, named
 * {@code PREFIX<namespace id>/<page hash>}, with the page's CRC-32C and length in its metadata, checked on every read.
 * An object that is torn, what a service that does not make puts atomic shows of a put cut short or still in
 * progress, is not a page yet: one without the {@code hicache-crc32c} metadata (a body whose metadata has not
 * landed), or whose length disagrees with the length it records (a body part written, or part replaced), is a
 * {@link PageStatus#MISS} to lookups and gets alike, counted ({@link #tornObjects()}) and logged at most every 10
 * seconds; never {@link PageStatus#CORRUPT}, which is for bytes that fail their checksum, nor
 * {@link PageStatus#SIZE_MISMATCH}. It is left in place, since on a shared bucket it may be another writer's put
 * still going on, and the next put of the page replaces it. Built on
 * the SDK's asynchronous client (Netty): a batch's requests go out in parallel, at most {@code s3.concurrency} in
 * flight across the store ({@link RequestLimiter}); bodies go out of and come into the caller's off-heap memory
 * directly ({@code fromByteBufferUnsafe}; {@link IntoSegments}). The leading-hit query sends HEADs in parallel and
 * stops at the first miss.
 *
 * <p>Every attempt of every request is bounded by {@code s3.request-timeout}; throttling, server errors and
 * timeouts are retried with exponential backoff up to {@code s3.max-attempts}; and no request outlives its call's
 * deadline, so a call completes by its deadline (plus at most one request timeout) whatever the server does, with
 * an outcome per page. Opening the store checks that the bucket exists and the credentials work.
 *
 * <p>Declares PERSISTENT and SHARED: any number of stores, anywhere, on the same bucket and prefix see each other's
 * pages. Has no capacity of its own: size the bucket with a lifecycle rule. Thread-safe; the opener closes it,
 * which closes the client and its connections.
 */
public final class S3PageStore extends AbstractPageStore {
    private static final System.Logger LOG = System.getLogger(S3PageStore.class.getName());
    /** Metadata key of the page's CRC-32C, as 8 hex digits. */
    static final String CRC_METADATA = "hicache-crc32c";
    /** Metadata key of the page's length in bytes, in decimal: what the object's own length must be. */
    static final String LENGTH_METADATA = "hicache-length";

    private static final int PREFERRED_BATCH = 128;
    /** DeleteObjects takes at most this many keys. */
    private static final int DELETE_BATCH = 1000;

    private final S3Config config;
    private final S3AsyncClient s3;
    private final RequestLimiter limiter;
    private final LongAdder tornObjects = new LongAdder();
    private final RateLimitedLog tornLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));

    private S3PageStore(S3Config config, S3AsyncClient s3) {
        super(
                "s3",
                "s3://" + config.bucket() + "/" + config.prefix()
                        + config.endpoint().map(e -> " at " + e).orElse(""),
                new StoreCapabilities(
                        Set.of(Capability.PERSISTENT, Capability.SHARED), PageFormat.MAX_PAGE_BYTES, PREFERRED_BATCH));
        this.config = config;
        this.s3 = s3;
        this.limiter = new RequestLimiter(config.concurrency());
    }

    /**
     * Opens the store and checks the bucket.
     *
     * @throws HiCacheException {@link ErrorCode#STORE_UNAVAILABLE} when the bucket does not exist, the credentials
     *     are refused or missing, or the service cannot be reached, saying which
     */
    public static S3PageStore open(S3Config config) {
        S3AsyncClient client = S3Clients.build(config);
        try {
            S3Clients.checkBucket(client, config);
        } catch (RuntimeException e) {
            client.close();
            throw e;
        }
        return new S3PageStore(config, client);
    }

    /** The object name of {@code key}'s page. */
    public String objectKey(StoreKey key) {
        return config.prefix() + key.namespace().id() + "/" + key.hash().toHex();
    }

    /** The store's bucket. */
    public String bucket() {
        return config.bucket();
    }

    /* ---------------------------------------------------------------- lookups and reads */

    @Override
    protected CompletableFuture<Integer> doLeadingHits(List<StoreKey> keys, Deadline deadline) {
        int n = keys.size();
        AtomicInteger firstMiss = new AtomicInteger(n);
        List<CompletableFuture<Boolean>> heads = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int index = i;
            String key = objectKey(keys.get(i));
            heads.add(limiter.submit(() -> {
                // A key past a known miss no longer counts: do not ask about it.
                if (index > firstMiss.get() || deadline.isOver()) {
                    return CompletableFuture.completedFuture(false);
                }
                return s3.headObject(b -> b.bucket(config.bucket()).key(key).overrideConfiguration(timeouts(deadline)))
                        .handle((response, error) -> {
                            if (error != null || torn(key, response) != null) {
                                firstMiss.accumulateAndGet(index, Math::min);
                                if (error != null
                                        && !(unwrap(error) instanceof NoSuchKeyException)
                                        && !isNotFound(error)) {
                                    LOG.log(Level.DEBUG, () -> "s3 store: HEAD " + key + " failed: " + unwrap(error));
                                }
                                return false;
                            }
                            return true;
                        });
            }));
        }
        return CompletableFuture.allOf(heads.toArray(CompletableFuture[]::new)).handle((done, error) -> {
            int hits = 0;
            while (hits < n && heads.get(hits).getNow(false)) {
                hits++;
            }
            return hits;
        });
    }

    @Override
    protected CompletableFuture<BatchResult> doGet(PageBatch targets, Deadline deadline) {
        return perPage(targets.size(), deadline, i -> {
            MemorySegment target = targets.page(i);
            String key = objectKey(targets.key(i));
            IntoSegments into = IntoSegments.whole(
                    target,
                    (response, objectLength) -> torn(key, response.metadata(), objectLength),
                    response -> checksumProblem(response, target));
            CompletableFuture<PageOutcome> get = s3.getObject(
                    b -> b.bucket(config.bucket()).key(key).overrideConfiguration(timeouts(deadline)), into);
            return guard(get, into, deadline).exceptionally(error -> failure("GET " + key, error, deadline));
        });
    }

    /** {@link #torn(String, Map, long)} for a HEAD's answer. */
    private @Nullable PageOutcome torn(String key, HeadObjectResponse head) {
        Long length = head.contentLength();
        return length == null ? null : torn(key, head.metadata(), length);
    }

    /**
     * A {@link PageStatus#MISS}, counted and logged, when the object is torn: it has no checksum (its body has landed
     * but not its metadata, on a service that writes them apart), or it is not the length its metadata records; else
     * null. An object without a recorded length but with a checksum (written before the store recorded lengths) is
     * judged by its length and checksum alone.
     */
    private @Nullable PageOutcome torn(String key, Map<String, String> metadata, long objectLength) {
        String recorded = metadata.get(LENGTH_METADATA);
        String problem;
        if (metadata.get(CRC_METADATA) == null) {
            problem = "object " + key + " (" + objectLength + " bytes) has no " + CRC_METADATA + " metadata";
        } else if (recorded != null && !recorded.equals(Long.toString(objectLength))) {
            problem = "object " + key + " is " + objectLength + " bytes but records " + recorded;
        } else {
            return null;
        }
        tornObjects.increment();
        problem += ": torn (a put cut short or still landing); a miss";
        tornLog.log("s3 store: " + problem);
        return PageOutcome.of(PageStatus.MISS, problem);
    }

    /**
     * Torn objects found since the store opened, by gets and leading-hit queries (each time one is found): objects
     * without the {@code hicache-crc32c} metadata, or not the length they record. Each was answered as a miss. Not in
     * {@link #stats()}, whose {@link io.hicache.core.store.StoreStats} has no field for it; a get's miss is counted
     * there as any miss.
     */
    public long tornObjects() {
        return tornObjects.sum();
    }

    /**
     * Why a page that landed whole does not match the CRC-32C its object carries, or null when it does. An object
     * without one never gets here: it is torn ({@link #torn(String, Map, long)}).
     */
    private static @Nullable String checksumProblem(GetObjectResponse response, MemorySegment page) {
        String crc = response.metadata().get(CRC_METADATA);
        return crc != null && crc.equals(hex(PageChecksum.of(page))) ? null : "page checksum mismatch";
    }

    private static String hex(int crc) {
        return String.format("%08x", crc);
    }

    /* ---------------------------------------------------------------- writes */

    @Override
    protected CompletableFuture<BatchResult> doPut(PageBatch sources, Deadline deadline) {
        return perPage(sources.size(), deadline, i -> {
            MemorySegment page = sources.page(i);
            String key = objectKey(sources.key(i));
            Map<String, String> metadata =
                    Map.of(CRC_METADATA, hex(PageChecksum.of(page)), LENGTH_METADATA, Long.toString(page.byteSize()));
            // No copy: the SDK reads the caller's memory as it sends (and again if it retries).
            AsyncRequestBody body = AsyncRequestBody.fromByteBufferUnsafe(page.asByteBuffer());
            CompletableFuture<PageOutcome> put = s3.putObject(
                            b -> b.bucket(config.bucket())
                                    .key(key)
                                    .contentLength(page.byteSize())
                                    .contentType("application/octet-stream")
                                    .metadata(metadata)
                                    .overrideConfiguration(timeouts(deadline)),
                            body)
                    .thenApply(response -> PageOutcome.OK);
            return guard(put, null, deadline).exceptionally(error -> failure("PUT " + key, error, deadline));
        });
    }

    /* ---------------------------------------------------------------- removal */

    @Override
    protected CompletableFuture<BatchResult> doDelete(List<StoreKey> keys, Deadline deadline) {
        // S3 reports a delete of a missing object as done: a HEAD first tells OK from MISS.
        return perPage(keys.size(), deadline, i -> {
            String key = objectKey(keys.get(i));
            return s3.headObject(b -> b.bucket(config.bucket()).key(key).overrideConfiguration(timeouts(deadline)))
                    .thenCompose(head -> s3.deleteObject(
                            b -> b.bucket(config.bucket()).key(key).overrideConfiguration(timeouts(deadline))))
                    .thenApply(deleted -> PageOutcome.OK)
                    .exceptionally(error -> failure("DELETE " + key, error, deadline));
        });
    }

    @Override
    protected CompletableFuture<Void> doClear(Namespace namespace, Deadline deadline) {
        return deleteAll(config.prefix() + namespace.id() + "/", null, deadline);
    }

    @Override
    protected CompletableFuture<Void> doClearAll(Deadline deadline) {
        return deleteAll(config.prefix(), null, deadline);
    }

    /** Lists the objects under {@code prefix} a page at a time and deletes each page of them in one request. */
    private CompletableFuture<Void> deleteAll(String prefix, @Nullable String continuation, Deadline deadline) {
        ListObjectsV2Request.Builder list = ListObjectsV2Request.builder()
                .bucket(config.bucket())
                .prefix(prefix)
                .maxKeys(DELETE_BATCH)
                .overrideConfiguration(timeouts(deadline));
        if (continuation != null) {
            list.continuationToken(continuation);
        }
        return s3.listObjectsV2(list.build()).thenCompose((ListObjectsV2Response page) -> {
            List<ObjectIdentifier> ids = page.contents().stream()
                    .map(S3Object::key)
                    .map(k -> ObjectIdentifier.builder().key(k).build())
                    .toList();
            CompletableFuture<?> deleted = ids.isEmpty()
                    ? CompletableFuture.completedFuture(null)
                    : s3.deleteObjects(DeleteObjectsRequest.builder()
                            .bucket(config.bucket())
                            .delete(Delete.builder().objects(ids).quiet(true).build())
                            .overrideConfiguration(timeouts(deadline))
                            .build());
            return deleted.thenCompose(ignored -> Boolean.TRUE.equals(page.isTruncated())
                    ? deleteAll(prefix, page.nextContinuationToken(), deadline)
                    : CompletableFuture.completedFuture(null));
        });
    }

    /* ---------------------------------------------------------------- plumbing */

    /**
     * Each attempt within {@code s3.request-timeout}, the whole request (retries included) within what is left of
     * the call's deadline.
     */
    private AwsRequestOverrideConfiguration timeouts(Deadline deadline) {
        Duration left = Duration.ofNanos(Math.max(1_000_000, deadline.remainingNanos()));
        return AwsRequestOverrideConfiguration.builder()
                .apiCallAttemptTimeout(config.requestTimeout())
                .apiCallTimeout(left)
                .build();
    }

    /**
     * Bounds a request's future by the deadline plus one request timeout, however the client behaves; a GET given up
     * on is abandoned, so it writes no more into its target.
     */
    private CompletableFuture<PageOutcome> guard(
            CompletableFuture<PageOutcome> request, @Nullable IntoSegments into, Deadline deadline) {
        long limit =
                Math.max(0, deadline.remainingNanos()) + config.requestTimeout().toNanos();
        return request.orTimeout(limit, TimeUnit.NANOSECONDS).whenComplete((outcome, error) -> {
            if (error != null && into != null) {
                into.abandon();
            }
        });
    }

    /** Runs one request per page through the limiter; a page still waiting when the deadline passes is not sent. */
    private CompletableFuture<BatchResult> perPage(
            int size, Deadline deadline, Function<Integer, CompletableFuture<PageOutcome>> request) {
        List<CompletableFuture<PageOutcome>> pages = new ArrayList<>(size);
        for (int i = 0; i < size; i++) {
            int index = i;
            pages.add(limiter.submit(() -> deadline.isOver()
                    ? CompletableFuture.completedFuture(PageOutcome.of(PageStatus.stoppedBy(deadline)))
                    : request.apply(index)));
        }
        return CompletableFuture.allOf(pages.toArray(CompletableFuture[]::new)).handle((done, error) -> {
            BatchResult.Builder result = BatchResult.builder(size);
            for (int i = 0; i < size; i++) {
                result.set(
                        i,
                        pages.get(i).isCompletedExceptionally()
                                ? failure(
                                        "request",
                                        pages.get(i).handle((v, e) -> e).join(),
                                        deadline)
                                : pages.get(i).join());
            }
            return result.build();
        });
    }

    /** What a failed request means for its page. */
    private static PageOutcome failure(String what, Throwable error, Deadline deadline) {
        Throwable cause = unwrap(error);
        if (cause instanceof NoSuchKeyException || isNotFound(cause)) {
            return PageOutcome.MISS;
        }
        if (cause instanceof ApiCallTimeoutException
                || cause instanceof ApiCallAttemptTimeoutException
                || cause instanceof TimeoutException) {
            return PageOutcome.of(
                    deadline.isOver() ? PageStatus.stoppedBy(deadline) : PageStatus.FAILED,
                    what + " timed out: " + cause.getMessage());
        }
        String message = cause instanceof S3Exception s
                ? "HTTP " + s.statusCode() + " " + s.awsErrorDetails().errorCode()
                : cause instanceof SdkException ? cause.getMessage() : cause.toString();
        return PageOutcome.of(PageStatus.FAILED, what + " failed: " + message);
    }

    private static boolean isNotFound(Throwable t) {
        return unwrap(t) instanceof S3Exception s && s.statusCode() == 404;
    }

    private static Throwable unwrap(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    @Override
    protected void doClose() {
        s3.close();
    }

    @Override
    public String toString() {
        return "S3PageStore[" + location() + "]";
    }
}
