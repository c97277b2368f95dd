package io.hicache.storage.s3.client;

import io.hicache.core.store.PageOutcome;
import io.hicache.core.store.PageStatus;
import io.hicache.core.util.Checks;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import software.amazon.awssdk.core.async.AsyncResponseTransformer;
import software.amazon.awssdk.core.async.SdkPublisher;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/**
 * Lands a GET's body in the caller's memory as it arrives from the network (one copy, out of the HTTP client's
 * buffer): the whole object into one segment ({@link #whole}, the {@code s3} store's page) or a range of it scattered
 * into several ({@link #scatter}, the pieces of a NIXL OBJ read; bytes between them are skipped). Its outcome:
 *
 * <ul>
 *   <li>what the {@link Screen} given answers for the headers, when it answers: the caller's own verdict on an
 *       object it can tell is damaged (the {@code s3} store's torn objects), decided before any other check; nothing
 *       is written;</li>
 *   <li>{@link PageStatus#SIZE_MISMATCH} when the object or the body is not the length expected, decided from the
 *       headers: nothing is written, the targets stay untouched;</li>
 *   <li>{@link PageStatus#FAILED} when the body is longer or shorter than its headers said;</li>
 *   <li>{@link PageStatus#CANCELLED} once {@link #abandon() abandoned}, because the call it belongs to has given up on
 *       it: from then on it writes nothing more, so a late packet can never touch memory the caller has taken
 *       back;</li>
 *   <li>{@link PageStatus#CORRUPT} when every byte landed but the {@link Check} given finds them wrong;</li>
 *   <li>{@link PageStatus#OK} otherwise.</li>
 * </ul>
 * A failed request (an HTTP error, a dropped connection) fails the future instead, with the SDK's exception.
 *
 * <p>Used by one request at a time; a retry calls {@link #prepare()} again and starts over. {@link #abandon()} may
 * come from any thread. The targets belong to the caller, who must keep them alive until the future completes or
 * {@link #abandon()} returns.
 */
public final class IntoSegments implements AsyncResponseTransformer<GetObjectResponse, PageOutcome> {
    /** One destination: {@code target} receives the object's bytes from {@code objectOffset} on. */
    public record Part(long objectOffset, MemorySegment target) {}

    /** Checks a body once all of it has landed: null when it is good, else why it is not. */
    @FunctionalInterface
    public interface Check {
        @Nullable
        String problem(GetObjectResponse response);
    }

    /**
     * Looks at an object's headers before its body: an outcome to end the GET with (the body is then discarded
     * unread), or null to go on.
     */
    @FunctionalInterface
    public interface Screen {
        @Nullable
        PageOutcome outcome(GetObjectResponse response, long objectLength);
    }

    private static final Check NO_CHECK = response -> null;
    private static final Screen NO_SCREEN = (response, objectLength) -> null;

    private final List<Part> parts;
    private final long bodyStart;
    private final long bodyLength;
    private final long objectLength;
    private final Check check;
    private final Screen screen;
    private final Object lock = new Object();
    private boolean abandoned;
    /** The current attempt's outcome: null until {@link #prepare()}. */
    private volatile @Nullable CompletableFuture<PageOutcome> result;
    /** The current attempt's headers: null until {@link #onResponse}. */
    private volatile @Nullable GetObjectResponse response;

    private IntoSegments(
            List<Part> parts, long bodyStart, long bodyLength, long objectLength, Screen screen, Check check) {
        this.parts = List.copyOf(parts);
        this.bodyStart = bodyStart;
        this.bodyLength = bodyLength;
        this.objectLength = objectLength;
        this.screen = screen;
        this.check = check;
    }

    /**
     * Receives a whole object, which must be {@code target}'s length, after {@code screen} has let its headers pass,
     * and checks it with {@code check}.
     */
    public static IntoSegments whole(MemorySegment target, Screen screen, Check check) {
        return new IntoSegments(List.of(new Part(0, target)), 0, target.byteSize(), target.byteSize(), screen, check);
    }

    /**
     * Receives the body of a ranged (or whole) GET: the object's bytes {@code [bodyStart, bodyStart + bodyLength)}
     * of an object that must be {@code objectLength} long, into {@code parts} sorted by object offset.
     */
    public static IntoSegments scatter(List<Part> parts, long bodyStart, long bodyLength, long objectLength) {
        return new IntoSegments(parts, bodyStart, bodyLength, objectLength, NO_SCREEN, NO_CHECK);
    }

    @Override
    public CompletableFuture<PageOutcome> prepare() {
        result = new CompletableFuture<>();
        return result;
    }

    @Override
    public void onResponse(GetObjectResponse r) {
        response = r;
    }

    @Override
    public void onStream(SdkPublisher<ByteBuffer> publisher) {
        // The SDK calls prepare() and onResponse() before onStream().
        CompletableFuture<PageOutcome> mine = Checks.checkNotNull(result, "the future prepare() made");
        GetObjectResponse headers = Checks.checkNotNull(response, "the response onResponse() gave");
        long total = objectLength(headers);
        PageOutcome screened = screen.outcome(headers, total);
        if (screened != null) {
            publisher.subscribe(new DiscardBody());
            mine.complete(screened);
            return;
        }
        Long length = headers.contentLength();
        if (total != objectLength || length == null || length != bodyLength) {
            publisher.subscribe(new DiscardBody());
            mine.complete(PageOutcome.of(
                    PageStatus.SIZE_MISMATCH, "the object is " + total + " bytes, expected " + objectLength));
            return;
        }
        publisher.subscribe(new Scatter(mine, headers));
    }

    @Override
    public void exceptionOccurred(Throwable error) {
        CompletableFuture<PageOutcome> mine = result;
        if (mine != null) {
            mine.completeExceptionally(error);
        }
    }

    /** Stops all further writes into the targets; returns once no write is in progress. */
    public void abandon() {
        synchronized (lock) {
            abandoned = true;
        }
    }

    /** The object's full length: from Content-Range for a ranged GET, else the Content-Length. */
    private static long objectLength(GetObjectResponse r) {
        String range = r.contentRange();
        if (range != null) {
            int slash = range.lastIndexOf('/');
            if (slash >= 0 && !range.endsWith("*")) {
                return Long.parseLong(range.substring(slash + 1).trim());
            }
        }
        return r.contentLength() == null ? -1 : r.contentLength();
    }

    /** Copies each chunk into the parts it overlaps, under the lock that {@link #abandon()} takes. */
    private final class Scatter implements Subscriber<ByteBuffer> {
        private final CompletableFuture<PageOutcome> outcome;
        private final GetObjectResponse headers;
        /** Null until {@link #onSubscribe}, which comes before any other signal. */
        private @Nullable Subscription subscription;

        private long position = bodyStart;
        private int part;

        Scatter(CompletableFuture<PageOutcome> outcome, GetObjectResponse headers) {
            this.outcome = outcome;
            this.headers = headers;
        }

        @Override
        public void onSubscribe(Subscription s) {
            subscription = s;
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onNext(ByteBuffer chunk) {
            synchronized (lock) {
                MemorySegment bytes = MemorySegment.ofBuffer(chunk);
                long chunkStart = position;
                long chunkEnd = position + bytes.byteSize();
                if (abandoned || chunkEnd > bodyStart + bodyLength) {
                    Checks.checkNotNull(subscription, "the subscription onSubscribe() gave")
                            .cancel();
                    outcome.complete(
                            abandoned
                                    ? abandonedOutcome()
                                    : PageOutcome.of(PageStatus.FAILED, "the body is longer than its Content-Length"));
                    return;
                }
                while (part < parts.size()) {
                    Part p = parts.get(part);
                    long partEnd = p.objectOffset() + p.target().byteSize();
                    long from = Math.max(chunkStart, p.objectOffset());
                    long to = Math.min(chunkEnd, partEnd);
                    if (from < to) {
                        MemorySegment.copy(bytes, from - chunkStart, p.target(), from - p.objectOffset(), to - from);
                    }
                    if (partEnd > chunkEnd) {
                        break; // this part continues in the next chunk
                    }
                    part++;
                }
                position = chunkEnd;
            }
        }

        @Override
        public void onError(Throwable t) {
            outcome.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            synchronized (lock) {
                if (abandoned) {
                    outcome.complete(abandonedOutcome());
                } else if (position != bodyStart + bodyLength) {
                    outcome.complete(PageOutcome.of(
                            PageStatus.FAILED,
                            "the body ended after " + (position - bodyStart) + " of " + bodyLength + " bytes"));
                } else {
                    String problem = check.problem(headers);
                    outcome.complete(problem == null ? PageOutcome.OK : PageOutcome.of(PageStatus.CORRUPT, problem));
                }
            }
        }
    }

    private static PageOutcome abandonedOutcome() {
        return PageOutcome.of(PageStatus.CANCELLED, "abandoned: the call gave up on this GET");
    }
}
