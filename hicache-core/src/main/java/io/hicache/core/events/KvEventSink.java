package io.hicache.core.events;

import io.hicache.core.util.Checks;
import io.hicache.core.util.RateLimitedLog;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;

/**
 * Takes KV events from any thread without ever blocking it, and publishes them in order, in batches, on its own
 * thread ({@code hicache-<role>}): what stands between a cache and a slow subscriber. Events wait in a queue of
 * {@code max_queue_size}; when it is full the oldest is dropped and counted ({@link Stats#droppedEvents()}), as a
 * router that falls behind must resynchronise anyway. The thread takes everything queued (up to
 * {@link #MAX_BATCH_EVENTS}) as one batch, stamps it with the time and hands it to the publisher; a batch the publisher
 * fails on is counted and logged (rate-limited) and the thread goes on: it never dies on a failure.
 *
 * <p>{@link #disabled()} is a sink that takes nothing and has no thread: check {@link #enabled()} before building an
 * event, so that nobody pays for events nobody reads.
 *
 * <p>Thread-safe. Owns its publisher: {@link #close()} publishes what is queued (for up to its timeout), stops the
 * thread and closes the publisher. The sink's creator closes the sink.
 */
public final class KvEventSink implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(KvEventSink.class.getName());
    /** The most events one batch carries, so that one message stays small for the subscriber. */
    public static final int MAX_BATCH_EVENTS = 1024;

    private static final long CLOSE_WAIT_MILLIS = 5_000;
    private static final KvEventSink DISABLED = new KvEventSink();

    /**
     * What the sink has done so far: events waiting, events dropped (oldest first, the queue being full), batches and
     * events handed to the publisher, batches it failed on. Immutable.
     */
    public record Stats(
            long queuedEvents, long droppedEvents, long publishedBatches, long publishedEvents, long failedBatches) {}

    private final @Nullable KvEventPublisher publisher;
    private final int capacity;
    private final @Nullable ArrayDeque<KvEvent> queue;
    private final @Nullable Thread thread;
    private final LongAdder dropped = new LongAdder();
    private final LongAdder publishedBatches = new LongAdder();
    private final LongAdder publishedEvents = new LongAdder();
    private final LongAdder failedBatches = new LongAdder();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final RateLimitedLog failureLog = new RateLimitedLog(LOG, Level.WARNING, Duration.ofSeconds(10));
    /** True while the thread publishes a batch it took: what {@link #awaitIdle} waits for besides the queue. */
    private boolean publishing;

    private KvEventSink() {
        this.publisher = null;
        this.capacity = 0;
        this.queue = null;
        this.thread = null;
    }

    private KvEventSink(String role, KvEventPublisher publisher, int maxQueueEvents) {
        this.publisher = Checks.checkNotNull(publisher, "publisher");
        this.capacity = Checks.checkPositive(maxQueueEvents, "maxQueueEvents");
        this.queue = new ArrayDeque<>(Math.min(maxQueueEvents, 4096));
        this.thread = Threads.start(role, this::run);
    }

    /** A sink that takes no events. */
    public static KvEventSink disabled() {
        return DISABLED;
    }

    /**
     * A sink publishing through {@code publisher} on the thread {@code hicache-<role>}, holding up to
     * {@code maxQueueEvents} events; it takes ownership of the publisher.
     */
    public static KvEventSink over(String role, KvEventPublisher publisher, int maxQueueEvents) {
        return new KvEventSink(role, publisher, maxQueueEvents);
    }

    /**
     * The sink {@code config} asks for: {@link #disabled()} when its publisher is {@code "null"}, else one over the
     * publisher it names (see {@link KvEventPublishers#open}) holding {@code max_queue_size} events.
     */
    public static KvEventSink open(String role, KvEventsConfig config) {
        return config.enabled() ? over(role, KvEventPublishers.open(config), config.maxQueueEvents()) : DISABLED;
    }

    /** False for {@link #disabled()}: events given to it are ignored. */
    public boolean enabled() {
        return publisher != null;
    }

    /** Queues {@code event}; never blocks. Drops the oldest queued event when full; ignored when disabled or closed. */
    public void emit(KvEvent event) {
        if (publisher == null || closed.get()) {
            return;
        }
        Checks.checkNotNull(event, "event");
        ArrayDeque<KvEvent> queue = Checks.checkNotNull(this.queue, "an enabled sink's queue");
        synchronized (queue) {
            if (queue.size() == capacity) {
                queue.pollFirst();
                dropped.increment();
            }
            queue.addLast(event);
            if (queue.size() == 1) {
                queue.notifyAll();
            }
        }
    }

    /** The counters now. */
    public Stats stats() {
        int queued;
        if (queue == null) {
            queued = 0;
        } else {
            synchronized (queue) {
                queued = queue.size();
            }
        }
        return new Stats(queued, dropped.sum(), publishedBatches.sum(), publishedEvents.sum(), failedBatches.sum());
    }

    /** True when every event emitted so far has been handed to the publisher (or dropped). */
    public boolean idle() {
        if (queue == null) {
            return true;
        }
        synchronized (queue) {
            return queue.isEmpty() && !publishing;
        }
    }

    /**
     * Waits up to {@code timeout} until every event emitted so far has been handed to the publisher (or dropped); true
     * if so. For tests and orderly checkpoints.
     */
    public boolean awaitIdle(Duration timeout) throws InterruptedException {
        if (queue == null) {
            return true;
        }
        long end = System.nanoTime() + timeout.toNanos();
        synchronized (queue) {
            while (!queue.isEmpty() || publishing) {
                long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
                if (left <= 0) {
                    return false;
                }
                queue.wait(left);
            }
            return true;
        }
    }

    private void run() {
        ArrayDeque<KvEvent> queue = Checks.checkNotNull(this.queue, "an enabled sink's queue");
        KvEventPublisher publisher = Checks.checkNotNull(this.publisher, "an enabled sink's publisher");
        while (true) {
            List<KvEvent> batch;
            synchronized (queue) {
                publishing = false;
                queue.notifyAll(); // awaitIdle
                while (queue.isEmpty() && !closed.get()) {
                    try {
                        queue.wait(100);
                    } catch (InterruptedException e) {
                        // close interrupts only a thread stuck past its wait; the loop condition decides
                    }
                }
                if (queue.isEmpty()) {
                    return; // closed, and everything queued was published
                }
                batch = new ArrayList<>(Math.min(queue.size(), MAX_BATCH_EVENTS));
                while (!queue.isEmpty() && batch.size() < MAX_BATCH_EVENTS) {
                    batch.add(queue.pollFirst());
                }
                publishing = true;
            }
            try {
                publisher.publish(KvEventBatch.now(batch));
                publishedBatches.increment();
                publishedEvents.add(batch.size());
            } catch (Throwable t) {
                failedBatches.increment();
                failureLog.log("hicache-kv-events: a batch of " + batch.size() + " events was not published (" + t
                        + "); going on with the next");
            }
        }
    }

    /**
     * Publishes what is queued (waiting up to 5 s), stops the thread and closes the publisher. Events emitted after
     * this are ignored. A second call does nothing.
     */
    @Override
    public void close() {
        KvEventPublisher publisher = this.publisher;
        ArrayDeque<KvEvent> queue = this.queue;
        Thread thread = this.thread;
        if (publisher == null || queue == null || thread == null || !closed.compareAndSet(false, true)) {
            return;
        }
        synchronized (queue) {
            queue.notifyAll();
        }
        try {
            thread.join(CLOSE_WAIT_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            thread.interrupt();
            Stats s = stats();
            LOG.log(
                    Level.WARNING,
                    "KV events: the publisher did not finish within " + CLOSE_WAIT_MILLIS + " ms of " + "closing; "
                            + s.queuedEvents() + " events were not published");
        }
        try {
            publisher.close();
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "closing the KV event publisher failed", e);
        }
    }
}
