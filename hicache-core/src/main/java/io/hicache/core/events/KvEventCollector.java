package io.hicache.core.events;

import java.util.ArrayList;
import java.util.List;

/**
 * A publisher that keeps the batches in memory, for a consumer in the same process (a Java router, a test): hand it to
 * {@link io.hicache.core.cache.HiCacheBuilder#kvEventPublisher} and read what was published with {@link #drain()}.
 * It keeps everything until drained, so a consumer that never drains should not use it.
 *
 * <p>Thread-safe. Closing it stops it taking batches; what it holds stays readable.
 */
public final class KvEventCollector implements KvEventPublisher {
    private final List<KvEventBatch> batches = new ArrayList<>();
    private boolean closed;

    @Override
    public synchronized void publish(KvEventBatch batch) {
        if (closed) {
            throw new IllegalStateException("the collector is closed");
        }
        batches.add(batch);
    }

    /** Takes every batch published so far, oldest first. */
    public synchronized List<KvEventBatch> drain() {
        List<KvEventBatch> out = List.copyOf(batches);
        batches.clear();
        return out;
    }

    /** Takes the events of every batch published so far, oldest first. */
    public List<KvEvent> drainEvents() {
        List<KvEvent> out = new ArrayList<>();
        for (KvEventBatch b : drain()) {
            out.addAll(b.events());
        }
        return out;
    }

    @Override
    public synchronized void close() {
        closed = true;
    }
}
