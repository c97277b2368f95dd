package io.hicache.storage.nixl.obj;

import io.hicache.core.store.PageOutcome;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.nixl.spi.FanInCompletion;
import io.hicache.storage.nixl.spi.FanInRequest;
import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.NixlStatus;
import io.hicache.storage.nixl.spi.Piece;
import io.hicache.storage.nixl.spi.XferOp;
import io.hicache.storage.s3.client.IntoSegments;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import software.amazon.awssdk.core.async.AsyncRequestBody;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * A prepared OBJ transfer: one S3 request per object, fanned in by a {@link FanInCompletion}. Cancelling abandons the
 * GETs (their bodies write nothing more) and lets PUTs in flight finish, since the SDK may still be reading their
 * bodies from the caller's memory; the post ends once every request has. Thread-safe as {@link FanInRequest} is.
 */
final class ObjRequest extends FanInRequest<ObjRequest.ObjectTask> {
    /** One object's pieces, sorted by object offset; {@code whole} when they cover it exactly. */
    record ObjectTask(MemoryRegion.Obj object, List<Piece[]> pieces, boolean whole) {}

    private final S3AsyncClient s3;
    private final String bucket;
    private final XferOp op;

    ObjRequest(S3AsyncClient s3, String bucket, XferOp op, List<ObjectTask> tasks) {
        super(tasks);
        this.s3 = s3;
        this.bucket = bucket;
        this.op = op;
    }

    @Override
    protected void start(FanInCompletion post, ObjectTask task) {
        CompletableFuture<PageOutcome> request;
        try {
            request = op == XferOp.WRITE ? put(task) : get(post, task);
        } catch (RuntimeException e) {
            request = CompletableFuture.failedFuture(e);
        }
        request.whenComplete((outcome, error) -> {
            if (error != null) {
                post.fail(classify(error), task.object().key() + ": " + describe(error));
            } else if (outcome.status() != PageStatus.OK) {
                post.fail(statusOf(outcome), task.object().key() + ": " + outcome.detail());
            }
            post.partEnded();
        });
    }

    private CompletableFuture<PageOutcome> put(ObjectTask task) {
        ByteBuffer[] body = new ByteBuffer[task.pieces().size()];
        for (int i = 0; i < body.length; i++) {
            body[i] = task.pieces().get(i)[0].dram().asByteBuffer();
        }
        return s3.putObject(
                        b -> b.bucket(bucket)
                                .key(task.object().key())
                                .contentLength(task.object().length()),
                        AsyncRequestBody.fromByteBuffersUnsafe(body))
                .thenApply(r -> PageOutcome.OK);
    }

    private CompletableFuture<PageOutcome> get(FanInCompletion post, ObjectTask task) {
        List<IntoSegments.Part> parts = new ArrayList<>(task.pieces().size());
        for (Piece[] p : task.pieces()) {
            parts.add(new IntoSegments.Part(p[1].offset(), p[0].dram()));
        }
        long start = task.pieces().getFirst()[1].offset();
        Piece last = task.pieces().getLast()[1];
        long end = last.offset() + last.length();
        IntoSegments scatter =
                IntoSegments.scatter(parts, start, end - start, task.object().length());
        post.onCancel(scatter::abandon);
        String range = task.whole() ? null : "bytes=" + start + "-" + (end - 1);
        return s3.getObject(b -> b.bucket(bucket).key(task.object().key()).range(range), scatter);
    }

    /** NIXL's status for what a GET's body did: a length other than the registered one is a mismatch. */
    private static NixlStatus statusOf(PageOutcome outcome) {
        return switch (outcome.status()) {
            case OK -> NixlStatus.SUCCESS;
            case SIZE_MISMATCH -> NixlStatus.ERR_MISMATCH;
            case CANCELLED -> NixlStatus.ERR_CANCELED;
            default -> NixlStatus.ERR_BACKEND;
        };
    }

    private static NixlStatus classify(Throwable failure) {
        Throwable t = unwrap(failure);
        if (t instanceof NoSuchKeyException || (t instanceof S3Exception s && s.statusCode() == 404)) {
            return NixlStatus.ERR_NOT_FOUND;
        }
        if (t instanceof S3Exception s && s.statusCode() == 416) {
            return NixlStatus.ERR_MISMATCH; // a range past the object's end
        }
        return NixlStatus.ERR_BACKEND;
    }

    private static String describe(Throwable failure) {
        Throwable t = unwrap(failure);
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    private static Throwable unwrap(Throwable failure) {
        return failure instanceof CompletionException && failure.getCause() != null ? failure.getCause() : failure;
    }
}
