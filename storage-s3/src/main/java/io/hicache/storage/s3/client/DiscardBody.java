package io.hicache.storage.s3.client;

import java.nio.ByteBuffer;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;

/**
 * Takes a response body that will not be used and cancels it at once: for a GET whose outcome is decided from its
 * headers (a length that does not match). Stateless; one instance per body.
 */
final class DiscardBody implements Subscriber<ByteBuffer> {
    @Override
    public void onSubscribe(Subscription s) {
        s.cancel();
    }

    @Override
    public void onNext(ByteBuffer b) {
        // cancelled
    }

    @Override
    public void onError(Throwable t) {
        // the outcome is already decided
    }

    @Override
    public void onComplete() {
        // the outcome is already decided
    }
}
