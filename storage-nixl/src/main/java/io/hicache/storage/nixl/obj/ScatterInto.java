package io.hicache.storage.nixl.obj;

import io.hicache.storage.nixl.agent.NixlStatus;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import io.hicache.storage.s3.DiscardBody;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import software.amazon.awssdk.core.async.AsyncResponseTransformer;
import software.amazon.awssdk.core.async.SdkPublisher;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/**
 * Scatters a GET's body, as it arrives, into the local pieces of one object's READ descriptors (sorted by object
 * offset; bytes between them are skipped). The object's total length must be the registered one, else nothing is
 * written and the outcome is {@link NixlStatus#ERR_MISMATCH}. Once {@link #abandon() abandoned} it writes nothing
 * more, so a late packet never touches memory whose transfer was cancelled.
 *
 * <p>Used by one request at a time; a retry calls {@link #prepare()} again and starts over.
 */
final class ScatterInto implements AsyncResponseTransformer<GetObjectResponse, ScatterInto.Outcome> {
    /** What became of the object: a status and, for an error, why. */
    record Outcome(NixlStatus status, String detail) {
    }

    /** One destination: {@code target} receives the object's bytes from {@code objectOffset}. */
    record Part(long objectOffset, MemorySegment target) {
    }

    private final List<Part> parts;
    private final long bodyStart;
    private final long bodyLength;
    private final long objectLength;
    private final Object lock = new Object();
    private boolean abandoned;
    private volatile CompletableFuture<Outcome> result;
    private volatile GetObjectResponse response;

    /** Receives a body of the object's bytes {@code [bodyStart, bodyStart + bodyLength)}. */
    ScatterInto(List<Part> parts, long bodyStart, long bodyLength, long objectLength) {
        this.parts = parts;
        this.bodyStart = bodyStart;
        this.bodyLength = bodyLength;
        this.objectLength = objectLength;
    }

    @Override
    public CompletableFuture<Outcome> prepare() {
        result = new CompletableFuture<>();
        return result;
    }

    @Override
    public void onResponse(GetObjectResponse r) {
        response = r;
    }

    @Override
    public void onStream(SdkPublisher<ByteBuffer> publisher) {
        CompletableFuture<Outcome> mine = result;
        long total = totalLength(response);
        Long length = response.contentLength();
        if (total != objectLength || length == null || length != bodyLength) {
            publisher.subscribe(new DiscardBody());
            mine.complete(new Outcome(NixlStatus.ERR_MISMATCH, "the object is " + total + " bytes, registered as "
                    + objectLength));
            return;
        }
        publisher.subscribe(new Subscriber<ByteBuffer>() {
            private Subscription subscription;
            private long position = bodyStart;
            private int part;

            @Override
            public void onSubscribe(Subscription s) {
                subscription = s;
                s.request(Long.MAX_VALUE);
            }

            @Override
            public void onNext(ByteBuffer chunk) {
                synchronized (lock) {
                    if (abandoned) {
                        subscription.cancel();
                        mine.complete(new Outcome(NixlStatus.ERR_CANCELED, "cancelled"));
                        return;
                    }
                    MemorySegment bytes = MemorySegment.ofBuffer(chunk);
                    long chunkStart = position;
                    long chunkEnd = position + bytes.byteSize();
                    while (part < parts.size()) {
                        Part p = parts.get(part);
                        long from = Math.max(chunkStart, p.objectOffset());
                        long to = Math.min(chunkEnd, p.objectOffset() + p.target().byteSize());
                        if (from < to) {
                            MemorySegment.copy(bytes, from - chunkStart, p.target(), from - p.objectOffset(), to - from);
                        }
                        if (p.objectOffset() + p.target().byteSize() > chunkEnd) {
                            break; // this part continues in the next chunk
                        }
                        part++;
                    }
                    position = chunkEnd;
                }
            }

            @Override
            public void onError(Throwable t) {
                mine.completeExceptionally(t);
            }

            @Override
            public void onComplete() {
                synchronized (lock) {
                    if (abandoned) {
                        mine.complete(new Outcome(NixlStatus.ERR_CANCELED, "cancelled"));
                    } else if (position != bodyStart + bodyLength) {
                        mine.complete(new Outcome(NixlStatus.ERR_BACKEND, "the body ended after "
                                + (position - bodyStart) + " of " + bodyLength + " bytes"));
                    } else {
                        mine.complete(new Outcome(NixlStatus.SUCCESS, null));
                    }
                }
            }
        });
    }

    /** The object's full length: from Content-Range for a ranged GET, else the Content-Length. */
    private static long totalLength(GetObjectResponse r) {
        String range = r.contentRange();
        if (range != null) {
            int slash = range.lastIndexOf('/');
            if (slash >= 0 && !range.endsWith("*")) {
                return Long.parseLong(range.substring(slash + 1).trim());
            }
        }
        return r.contentLength() == null ? -1 : r.contentLength();
    }

    @Override
    public void exceptionOccurred(Throwable error) {
        CompletableFuture<Outcome> mine = result;
        if (mine != null) {
            mine.completeExceptionally(error);
        }
    }

    /** Stops all further writes into the targets; returns once no write is in progress. */
    void abandon() {
        synchronized (lock) {
            abandoned = true;
        }
    }
}
