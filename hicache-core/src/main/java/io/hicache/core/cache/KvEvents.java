package io.hicache.core.cache;

import java.util.ArrayList;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * The stream of {@link KvEvent}s a consumer drains: a bounded queue that drops the oldest event (and counts it) when
 * nobody keeps up, so the cache never waits for a router. Thread-safe.
 */
public final class KvEvents {
    private final int capacity;
    private final ArrayDeque<KvEvent> queue = new ArrayDeque<>();
    private final LongAdder dropped = new LongAdder();
    private volatile boolean enabled;

    KvEvents(int capacity) {
        this.capacity = capacity;
    }

    /** Starts recording events (off until a consumer asks: nobody pays for events nobody reads). */
    public void enable() {
        enabled = true;
    }

    void publish(KvEvent event) {
        if (!enabled || event.hashes().isEmpty()) {
            return;
        }
        synchronized (queue) {
            if (queue.size() == capacity) {
                queue.pollFirst();
                dropped.increment();
            }
            queue.addLast(event);
        }
    }

    /** Takes every event recorded so far, oldest first. */
    public List<KvEvent> drain() {
        synchronized (queue) {
            List<KvEvent> out = new ArrayList<>(queue);
            queue.clear();
            return out;
        }
    }

    /** Events dropped because the stream was full. */
    public long dropped() {
        return dropped.sum();
    }
}
