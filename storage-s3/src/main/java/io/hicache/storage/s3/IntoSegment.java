package io.hicache.storage.s3;

import io.hicache.core.store.PageChecksum;
import io.hicache.core.store.PageStatus;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import software.amazon.awssdk.core.async.AsyncResponseTransformer;
import software.amazon.awssdk.core.async.SdkPublisher;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/**
 * Lands a GET's body in the caller's page memory as it arrives from the network (one copy, out of the HTTP client's
 * buffer), then checks its length and CRC-32C against the object's metadata. A body of the wrong length is not
 * written at all (the target stays untouched). Once {@link #abandon() abandoned}, because the call it belongs to has
 * given up on it, it writes nothing more, so a late packet can never touch memory the caller has taken back.
 *
 * <p>Used by one request at a time; a retry calls {@link #prepare()} again and starts over.
 */
final class IntoSegment implements AsyncResponseTransformer<GetObjectResponse, IntoSegment.Outcome> {
    /** Metadata key of the page's CRC-32C, as 8 hex digits. */
    static final String CRC_METADATA = "hicache-crc32c";

    /** What became of one page. */
    record Outcome(PageStatus status, String detail) {
    }

    private final MemorySegment target;
    private final Object lock = new Object();
    private boolean abandoned;
    private volatile CompletableFuture<Outcome> result;
    private volatile GetObjectResponse response;

    IntoSegment(MemorySegment target) {
        this.target = target;
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
        Long length = response.contentLength();
        if (length == null || length != target.byteSize()) {
            publisher.subscribe(new DiscardBody());
            mine.complete(new Outcome(PageStatus.SIZE_MISMATCH, "stored page is " + length + " bytes, target is "
                    + target.byteSize()));
            return;
        }
        String crc = response.metadata().get(CRC_METADATA);
        publisher.subscribe(new Subscriber<ByteBuffer>() {
            private Subscription subscription;
            private long written;

            @Override
            public void onSubscribe(Subscription s) {
                subscription = s;
                s.request(Long.MAX_VALUE);
            }

            @Override
            public void onNext(ByteBuffer chunk) {
                synchronized (lock) {
                    int n = chunk.remaining();
                    if (abandoned || written + n > target.byteSize()) {
                        subscription.cancel();
                        mine.complete(new Outcome(PageStatus.FAILED, abandoned ? "abandoned"
                                : "the body is longer than its Content-Length"));
                        return;
                    }
                    MemorySegment.copy(MemorySegment.ofBuffer(chunk), 0, target, written, n);
                    written += n;
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
                        mine.complete(new Outcome(PageStatus.FAILED, "abandoned"));
                    } else if (written != target.byteSize()) {
                        mine.complete(new Outcome(PageStatus.FAILED, "the body ended after " + written + " of "
                                + target.byteSize() + " bytes"));
                    } else if (crc == null) {
                        mine.complete(new Outcome(PageStatus.CORRUPT, "the object has no " + CRC_METADATA
                                + " metadata: not written by this store"));
                    } else if (!crc.equals(hex(PageChecksum.of(target)))) {
                        mine.complete(new Outcome(PageStatus.CORRUPT, "page checksum mismatch"));
                    } else {
                        mine.complete(new Outcome(PageStatus.OK, null));
                    }
                }
            }
        });
    }

    @Override
    public void exceptionOccurred(Throwable error) {
        CompletableFuture<Outcome> mine = result;
        if (mine != null) {
            mine.completeExceptionally(error);
        }
    }

    /** Stops all further writes into the target; returns once no write is in progress. */
    void abandon() {
        synchronized (lock) {
            abandoned = true;
        }
    }

    static String hex(int crc) {
        return String.format("%08x", crc);
    }
}
