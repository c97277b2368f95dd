package io.hicache.core.store;

import io.hicache.core.Deadline;
import io.hicache.core.config.Units;
import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Keeps a store's bytes under its capacity. A put reserves its bytes before it writes. Once the store passes its
 * high-water mark the eviction thread frees the store's oldest or least recently used pages down to the low-water
 * mark; while the store is over its capacity a reservation waits (until its deadline) for it. Because a reservation
 * is granted only while the store is at or under capacity, the store never holds more than its capacity plus one
 * batch. A high-water mark below the capacity starts eviction early, so that puts rarely wait.
 *
 * <p>The eviction thread ({@code hicache-NAME-evictor}) never dies on a failed eviction: it logs, counts, pauses and
 * tries again. Thread-safe. The store closes it, after its last write.
 */
public final class CapacityGate implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(CapacityGate.class.getName());
    private static final long RETRY_PAUSE_MILLIS = 50;

    /** Frees stored pages; implemented by the store. */
    @FunctionalInterface
    public interface Evictor {
        /**
         * Removes pages holding about {@code bytes} (oldest or least recently used first, never a page being read),
         * each removal {@link #release released}; returns the bytes it freed, 0 when nothing could be removed now.
         */
        long evict(long bytes) throws Exception;
    }

    private final String name;
    private final long capacityBytes;
    private final long highWaterBytes;
    private final long lowWaterBytes;
    private final Evictor evictor;
    private final Thread thread;
    private final AtomicLong evictedBytes = new AtomicLong();
    private final AtomicLong evictionFailures = new AtomicLong();
    private long usedBytes;
    private boolean closed;

    /**
     * A gate over {@code usedBytes} already stored that starts evicting only past the capacity.
     *
     * @param lowWaterRatio where eviction stops, as a fraction of the capacity, in (0, 1]
     */
    public CapacityGate(String name, long capacityBytes, double lowWaterRatio, long usedBytes, Evictor evictor) {
        this(name, capacityBytes, 1.0, lowWaterRatio, usedBytes, evictor);
    }

    /**
     * A gate over {@code usedBytes} already stored.
     *
     * @param highWaterRatio where eviction starts, as a fraction of the capacity, in [lowWaterRatio, 1]
     * @param lowWaterRatio  where eviction stops, as a fraction of the capacity, in (0, 1]
     */
    public CapacityGate(String name, long capacityBytes, double highWaterRatio, double lowWaterRatio, long usedBytes,
            Evictor evictor) {
        Checks.checkPositive(capacityBytes, "capacityBytes");
        Checks.requireArgument(lowWaterRatio > 0 && lowWaterRatio <= 1, "lowWaterRatio must be in (0, 1], was %s",
                lowWaterRatio);
        Checks.requireArgument(highWaterRatio >= lowWaterRatio && highWaterRatio <= 1,
                "highWaterRatio must be in [lowWaterRatio, 1], was %s (lowWaterRatio %s)", highWaterRatio, lowWaterRatio);
        this.name = name;
        this.capacityBytes = capacityBytes;
        this.highWaterBytes = (long) (capacityBytes * highWaterRatio);
        this.lowWaterBytes = (long) (capacityBytes * lowWaterRatio);
        this.usedBytes = usedBytes;
        this.evictor = Checks.checkNotNull(evictor, "evictor");
        this.thread = Threads.unstarted(name + "-evictor", this::evictLoop);
    }

    /** Starts the eviction thread: once the store it evicts from is ready. */
    public void start() {
        thread.start();
    }

    /**
     * Reserves {@code bytes} for a put, waiting while the store is over capacity.
     *
     * @return false when the deadline passed first (nothing is reserved)
     */
    public synchronized boolean reserve(long bytes, Deadline deadline) throws InterruptedException {
        Checks.checkNotNegative(bytes, "bytes");
        while (usedBytes > capacityBytes) {
            if (closed || deadline.isOver()) {
                return false;
            }
            notifyAll();
            long millis = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()));
            wait(Math.min(millis, 100));
        }
        usedBytes += bytes;
        if (usedBytes > highWaterBytes) {
            notifyAll();
        }
        return true;
    }

    /** Gives back {@code bytes}: a reservation not written, or a page removed. */
    public synchronized void release(long bytes) {
        Checks.checkNotNegative(bytes, "bytes");
        usedBytes -= bytes;
        notifyAll();
    }

    /** Bytes stored or reserved now. */
    public synchronized long usedBytes() {
        return usedBytes;
    }

    public long capacityBytes() {
        return capacityBytes;
    }

    /** Bytes evicted since the gate opened. */
    public long evictedBytes() {
        return evictedBytes.get();
    }

    /** Evictions that threw since the gate opened. */
    public long evictionFailures() {
        return evictionFailures.get();
    }

    private void evictLoop() {
        while (true) {
            long excess;
            synchronized (this) {
                while (!closed && usedBytes <= highWaterBytes) {
                    try {
                        wait();
                    } catch (InterruptedException e) {
                        // only close interrupts; the loop re-checks
                    }
                }
                if (closed) {
                    return;
                }
                excess = usedBytes - lowWaterBytes;
            }
            long freed = 0;
            try {
                freed = evictor.evict(excess);
                evictedBytes.addAndGet(freed);
            } catch (Throwable t) {
                evictionFailures.incrementAndGet();
                LOG.log(Level.WARNING, "store '" + name + "': eviction of " + Units.formatBytes(excess) + " failed", t);
            }
            if (freed == 0) {
                // Everything evictable is being read or written: give them a moment.
                synchronized (this) {
                    if (!closed) {
                        try {
                            wait(RETRY_PAUSE_MILLIS);
                        } catch (InterruptedException e) {
                            // only close interrupts
                        }
                    }
                }
            }
        }
    }

    /** Stops the eviction thread; waiting reservations give up. */
    @Override
    public void close() {
        synchronized (this) {
            closed = true;
            notifyAll();
        }
        try {
            if (thread.isAlive()) {
                thread.join(TimeUnit.SECONDS.toMillis(30));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
