package io.hicache.storage.nixl.obj;

import io.hicache.storage.nixl.agent.MemoryRegion;
import io.hicache.storage.nixl.agent.NixlBackend;
import io.hicache.storage.nixl.agent.NixlStatus;
import io.hicache.storage.nixl.agent.Piece;
import io.hicache.storage.nixl.agent.XferOp;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import software.amazon.awssdk.core.async.AsyncRequestBody;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * A prepared OBJ transfer: one S3 request per object. Cancelling abandons the GETs (their bodies write nothing more)
 * and lets PUTs in flight finish, since the SDK may still be reading their bodies from the caller's memory; the post
 * ends once every request has. Thread-safe as {@link NixlBackend.Request} requires.
 */
final class ObjRequest implements NixlBackend.Request {
    /** One object's pieces, sorted by object offset; {@code whole} when they cover it exactly. */
    record ObjectTask(MemoryRegion.Obj object, List<Piece[]> pieces, boolean whole) {
    }

    private final S3AsyncClient s3;
    private final String bucket;
    private final XferOp op;
    private final List<ObjectTask> tasks;
    private volatile Post current;

    ObjRequest(S3AsyncClient s3, String bucket, XferOp op, List<ObjectTask> tasks) {
        this.s3 = s3;
        this.bucket = bucket;
        this.op = op;
        this.tasks = tasks;
    }

    @Override
    public void post(NixlBackend.Completion done) {
        Post post = new Post(done, tasks.size());
        current = post;
        for (ObjectTask task : tasks) {
            CompletableFuture<NixlStatus> request;
            try {
                request = op == XferOp.WRITE ? put(task) : get(post, task);
            } catch (RuntimeException e) {
                request = CompletableFuture.failedFuture(e);
            }
            request.whenComplete((status, error) -> post.ended(task, status, error));
        }
    }

    private CompletableFuture<NixlStatus> put(ObjectTask task) {
        ByteBuffer[] body = new ByteBuffer[task.pieces().size()];
        for (int i = 0; i < body.length; i++) {
            body[i] = task.pieces().get(i)[0].dram().asByteBuffer();
        }
        return s3.putObject(b -> b.bucket(bucket).key(task.object().key()).contentLength(task.object().length()),
                AsyncRequestBody.fromByteBuffersUnsafe(body)).thenApply(r -> NixlStatus.SUCCESS);
    }

    private CompletableFuture<NixlStatus> get(Post post, ObjectTask task) {
        List<ScatterInto.Part> parts = new ArrayList<>(task.pieces().size());
        for (Piece[] p : task.pieces()) {
            parts.add(new ScatterInto.Part(p[1].offset(), p[0].dram()));
        }
        long start = task.pieces().getFirst()[1].offset();
        Piece last = task.pieces().getLast()[1];
        long end = last.offset() + last.length();
        ScatterInto scatter = new ScatterInto(parts, start, end - start, task.object().length());
        post.track(scatter);
        String range = task.whole() ? null : "bytes=" + start + "-" + (end - 1);
        return s3.getObject(b -> b.bucket(bucket).key(task.object().key()).range(range), scatter)
                .thenApply(outcome -> {
                    post.detail(task, outcome.detail());
                    return outcome.status();
                });
    }

    @Override
    public void cancel() {
        Post post = current;
        if (post != null) {
            post.cancel();
        }
    }

    @Override
    public void release() {
        current = null;
    }

    /** One post's progress. */
    private static final class Post {
        private final NixlBackend.Completion done;
        private final AtomicInteger remaining;
        private final List<ScatterInto> scatters = new ArrayList<>();
        private boolean cancelled;
        private NixlStatus error;
        private String detail;

        Post(NixlBackend.Completion done, int tasks) {
            this.done = done;
            this.remaining = new AtomicInteger(tasks);
            if (tasks == 0) {
                done.complete(NixlStatus.SUCCESS, null);
            }
        }

        synchronized void track(ScatterInto scatter) {
            scatters.add(scatter);
            if (cancelled) {
                scatter.abandon();
            }
        }

        void cancel() {
            List<ScatterInto> toAbandon;
            synchronized (this) {
                cancelled = true;
                toAbandon = List.copyOf(scatters);
            }
            toAbandon.forEach(ScatterInto::abandon);
        }

        synchronized void detail(ObjectTask task, String why) {
            if (why != null && detail == null) {
                detail = task.object().key() + ": " + why;
            }
        }

        void ended(ObjectTask task, NixlStatus status, Throwable failure) {
            synchronized (this) {
                NixlStatus s = failure != null ? classify(failure) : status;
                if (s != NixlStatus.SUCCESS && (error == null || error == NixlStatus.ERR_CANCELED)) {
                    error = s;
                    if (failure != null) {
                        detail = task.object().key() + ": " + describe(failure);
                    }
                }
            }
            if (remaining.decrementAndGet() != 0) {
                return;
            }
            NixlStatus status0;
            String why;
            synchronized (this) {
                status0 = error != null ? error : NixlStatus.SUCCESS;
                why = error != null ? (detail != null ? detail : error.name()) : null;
            }
            done.complete(status0, why);
        }

        private static NixlStatus classify(Throwable failure) {
            Throwable t = failure instanceof CompletionException && failure.getCause() != null ? failure.getCause()
                    : failure;
            if (t instanceof NoSuchKeyException || (t instanceof S3Exception s && s.statusCode() == 404)) {
                return NixlStatus.ERR_NOT_FOUND;
            }
            if (t instanceof S3Exception s && s.statusCode() == 416) {
                return NixlStatus.ERR_MISMATCH; // a range past the object's end
            }
            return NixlStatus.ERR_BACKEND;
        }

        private static String describe(Throwable failure) {
            Throwable t = failure instanceof CompletionException && failure.getCause() != null ? failure.getCause()
                    : failure;
            return t.getClass().getSimpleName() + ": " + t.getMessage();
        }
    }
}
