package io.hicache.storage.nixl;

import io.hicache.core.util.Checks;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.s3.client.S3Clients;
import io.hicache.storage.s3.client.S3Config;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.model.Delete;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.ObjectIdentifier;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * Pages as objects for the OBJ plugin: {@code <prefix><namespace id>/<page hash>} in the bucket. Deletes and listings
 * go through a client of its own (NIXL has no call for them); each waits at most its request bound. Thread-safe; the
 * store closes it, which closes the client.
 */
final class ObjLayout implements StorageLayout {
    private static final int LIST_BATCH = 1000;

    private final S3AsyncClient s3;
    private final String bucket;
    private final String prefix;
    private final Duration requestBound;

    /** The layout over {@code config}'s {@code s3.*} bucket and prefix, with a client of its own. */
    static ObjLayout open(NixlStoreConfig config) {
        S3Config s3 = S3Config.fromParams(config.objParams());
        return new ObjLayout(
                S3Clients.build(s3),
                s3.bucket(),
                s3.prefix(),
                s3.requestTimeout().multipliedBy(s3.maxAttempts()));
    }

    ObjLayout(S3AsyncClient s3, String bucket, String prefix, Duration requestBound) {
        this.s3 = s3;
        this.bucket = bucket;
        this.prefix = prefix;
        this.requestBound = requestBound;
    }

    @Override
    public String location() {
        return "s3://" + bucket + "/" + prefix;
    }

    String key(String name) {
        return prefix + name;
    }

    @Override
    public String where(String name) {
        return key(name);
    }

    /** None: size the bucket with a lifecycle rule. */
    @Override
    public long defaultCapacityBytes(long storedBytes) {
        return 0;
    }

    @Override
    public MemoryRegion readRegion(String name, long storedBytes) {
        return new MemoryRegion.Obj(key(name), storedBytes);
    }

    @Override
    public MemoryRegion writeRegion(String name, long storedBytes) {
        return new MemoryRegion.Obj(key(name), storedBytes);
    }

    @Override
    public boolean delete(String name) throws IOException {
        // S3 reports a delete of a missing object as done: a HEAD first tells the two apart.
        try {
            await(s3.headObject(b -> b.bucket(bucket).key(key(name))));
        } catch (IOException e) {
            if (e.getCause() instanceof NoSuchKeyException
                    || (e.getCause() instanceof S3Exception s && s.statusCode() == 404)) {
                return false;
            }
            throw e;
        }
        await(s3.deleteObject(b -> b.bucket(bucket).key(key(name))));
        return true;
    }

    @Override
    public void clear(@Nullable String namespaceId) throws IOException {
        String under = namespaceId == null ? prefix : prefix + namespaceId + "/";
        for (List<S3Object> page : list(under)) {
            List<ObjectIdentifier> ids = page.stream()
                    .map(o -> ObjectIdentifier.builder().key(o.key()).build())
                    .toList();
            if (!ids.isEmpty()) {
                await(s3.deleteObjects(b -> b.bucket(bucket)
                        .delete(Delete.builder().objects(ids).quiet(true).build())));
            }
        }
    }

    @Override
    public List<Found> scan() throws IOException {
        List<Found> found = new ArrayList<>();
        for (List<S3Object> page : list(prefix)) {
            for (S3Object o : page) {
                String name = o.key().substring(prefix.length());
                if (name.indexOf('/') > 0) {
                    found.add(new Found(
                            name,
                            o.size(),
                            o.lastModified() == null ? 0 : o.lastModified().toEpochMilli()));
                }
            }
        }
        return found;
    }

    private List<List<S3Object>> list(String under) throws IOException {
        List<List<S3Object>> pages = new ArrayList<>();
        String token = null;
        do {
            ListObjectsV2Request.Builder req =
                    ListObjectsV2Request.builder().bucket(bucket).prefix(under).maxKeys(LIST_BATCH);
            if (token != null) {
                req.continuationToken(token);
            }
            ListObjectsV2Response r = await(s3.listObjectsV2(req.build()));
            pages.add(r.contents());
            token = Boolean.TRUE.equals(r.isTruncated()) ? r.nextContinuationToken() : null;
        } while (token != null);
        return pages;
    }

    private <T> T await(CompletableFuture<T> call) throws IOException {
        try {
            return call.get(requestBound.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            call.cancel(true);
            throw new InterruptedIOException("interrupted");
        } catch (TimeoutException e) {
            call.cancel(true);
            throw new IOException("no answer from " + location() + " within " + requestBound.toMillis() + " ms", e);
        } catch (ExecutionException e) {
            Throwable cause = Checks.checkNotNull(e.getCause(), "a failed call's cause");
            throw new IOException(cause.getMessage(), cause);
        }
    }

    @Override
    public void close() {
        s3.close();
    }
}
