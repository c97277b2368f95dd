package io.hicache.core.store;

import io.hicache.core.Deadline;
import io.hicache.core.config.Units;
import io.hicache.core.usage.PageUsageIndex;
import io.hicache.core.util.Checks;
import io.hicache.core.util.Threads;
import java.lang.System.Logger.Level;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Keeps a store's bytes under its capacity. The store's pages are in its {@link PageUsageIndex}, whose bytes the gate
 * reads; a put reserves its bytes here before it writes, and gives the reservation back once its pages are in the
 * index (or were not written). Once the store passes its high-water mark the eviction thread claims the index's
 * oldest pages (least recently used, or first inserted, as the index orders them; never a pinned page) down to the
 * low-water mark and hands them to the store to delete; while the store is over its capacity a reservation waits
 * (until its deadline) for it. Because a reservation is granted only while the store is at or under capacity, the
 * store never holds more than its capacity plus one batch. A high-water mark below the capacity starts eviction
 * early, so that puts rarely wait.
 *
 * <p>The eviction thread ({@code hicache-NAME-evictor}) never dies on a failed eviction: it logs, counts, pauses and
 * tries again. Thread-safe. The store closes it, after its last write.
 *
 * @param <K> the key type of the store's index
 */
public final class CapacityGate<K> implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(CapacityGate.class.getName());
    private static final long RETRY_PAUSE_MILLIS = 50;
    /** The longest a waiting reservation sleeps before it looks again: deletes free bytes without telling the gate. */
    private static final long RECHECK_MILLIS = 100;

    /** Deletes pages the gate claimed; implemented by the store. */
    @FunctionalInterface
    public interface Evictor<K> {
        /**
         * Deletes {@code pages} (claimed in the index, oldest first) from the store and removes each one deleted from
         * the index ({@link PageUsageIndex#removeEntry}); the gate gives back the claim of any page left in the index.
         */
        void evict(List<PageUsageIndex.Claimed<K>> pages) throws Exception;
    }

    private final String name;
    private final long capacityBytes;
    private final long highWaterBytes;
    private final long lowWaterBytes;
    private final PageUsageIndex<K> index;
    private final Evictor<K> evictor;
    private final Thread thread;
    private final AtomicLong evictedBytes = new AtomicLong();
    private final AtomicLong evictionFailures = new AtomicLong();
    private long reservedBytes;
    private boolean closed;

    /**
     * Where eviction starts and stops, as fractions of the capacity: it starts past {@code highWaterRatio} and stops
     * at {@code lowWaterRatio}. Immutable.
     *
     * @param highWaterRatio in [lowWaterRatio, 1]
     * @param lowWaterRatio  in (0, 1]
     */
    public record Watermarks(double highWaterRatio, double lowWaterRatio) {
        public Watermarks {
            Checks.requireArgument(
                    lowWaterRatio > 0 && lowWaterRatio <= 1, "lowWaterRatio must be in (0, 1], was %s", lowWaterRatio);
            Checks.requireArgument(
                    highWaterRatio >= lowWaterRatio && highWaterRatio <= 1,
                    "highWaterRatio must be in [lowWaterRatio, 1], was %s (lowWaterRatio %s)",
                    highWaterRatio,
                    lowWaterRatio);
        }

        /** Eviction starts only past the capacity and stops at {@code lowWaterRatio} of it. */
        public static Watermarks evictPastCapacityDownTo(double lowWaterRatio) {
            return new Watermarks(1.0, lowWaterRatio);
        }
    }

    /** A gate over the pages in {@code index}, evicting between {@code watermarks} of {@code capacityBytes}. */
    public CapacityGate(
            String name, long capacityBytes, Watermarks watermarks, PageUsageIndex<K> index, Evictor<K> evictor) {
        Checks.checkPositive(capacityBytes, "capacityBytes");
        Checks.checkNotNull(watermarks, "watermarks");
        double highWaterRatio = watermarks.highWaterRatio();
        double lowWaterRatio = watermarks.lowWaterRatio();
        this.name = name;
        this.capacityBytes = capacityBytes;
        this.highWaterBytes = (long) (capacityBytes * highWaterRatio);
        this.lowWaterBytes = (long) (capacityBytes * lowWaterRatio);
        this.index = Checks.checkNotNull(index, "index");
        this.evictor = Checks.checkNotNull(evictor, "evictor");
        this.thread = Threads.unstarted(name + "-evictor", this::evictLoop);
    }

    /** Starts the eviction thread: once the store it evicts from is ready. */
    public void start() {
        thread.start();
    }

    /**
     * Reserves {@code bytes} for a put, waiting while the store is over capacity. The put gives the reservation back
     * ({@link #release}) once its pages are in the index or were not written.
     *
     * @return false when the deadline passed first (nothing is reserved)
     */
    public synchronized boolean reserve(long bytes, Deadline deadline) throws InterruptedException {
        Checks.checkNotNegative(bytes, "bytes");
        while (usedBytes() > capacityBytes) {
            if (closed || deadline.isOver()) {
                return false;
            }
            notifyAll();
            long millis = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()));
            wait(Math.min(millis, RECHECK_MILLIS));
        }
        reservedBytes += bytes;
        if (usedBytes() > highWaterBytes) {
            notifyAll();
        }
        return true;
    }

    /** Gives back {@code bytes} of reservations: their pages are in the index now, or were not written. */
    public synchronized void release(long bytes) {
        Checks.checkNotNegative(bytes, "bytes");
        Checks.requireState(
                bytes <= reservedBytes,
                "store '%s' released %d bytes, but only %d are reserved",
                name,
                bytes,
                reservedBytes);
        reservedBytes -= bytes;
        notifyAll();
    }

    /** Bytes stored (in the index) or reserved now. */
    public synchronized long usedBytes() {
        return index.bytes() + reservedBytes;
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
                while (!closed && usedBytes() <= highWaterBytes) {
                    try {
                        wait();
                    } catch (InterruptedException e) {
                        // only close interrupts; the loop re-checks
                    }
                }
                if (closed) {
                    return;
                }
                excess = usedBytes() - lowWaterBytes;
            }
            long freed = evict(excess);
            synchronized (this) {
                notifyAll(); // reservations waiting for room look again
                if (freed == 0 && !closed) {
                    // Everything evictable is being read or written: give them a moment.
                    try {
                        wait(RETRY_PAUSE_MILLIS);
                    } catch (InterruptedException e) {
                        // only close interrupts
                    }
                }
            }
        }
    }

    /** Claims the oldest pages holding about {@code bytes} and has the store delete them; returns the bytes freed. */
    private long evict(long bytes) {
        List<PageUsageIndex.Claimed<K>> claimed = index.claimOldest(bytes);
        if (claimed.isEmpty()) {
            return 0;
        }
        try {
            evictor.evict(claimed);
        } catch (Throwable t) {
            evictionFailures.incrementAndGet();
            LOG.log(Level.WARNING, "store '" + name + "': eviction of " + Units.formatBytes(bytes) + " failed", t);
        }
        long freed = 0;
        for (PageUsageIndex.Claimed<K> page : claimed) {
            // A page no longer in the index was removed, by the store or by a delete meanwhile: its bytes are free.
            if (!index.unclaim(page.entry()) && index.keyOf(page.entry()) == null) {
                freed += page.bytes();
            }
        }
        evictedBytes.addAndGet(freed);
        return freed;
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
