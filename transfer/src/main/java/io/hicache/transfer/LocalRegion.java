package io.hicache.transfer;

import io.hicache.transfer.spi.MemoryKind;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.RegisteredRegion;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Memory registered with a {@link TransferEngine} and published in its segment. Peers read and write it through
 * the engine's transports; local requests may use any range inside it.
 *
 * <p>Thread-safe. {@link #close()} unregisters it: new remote requests for it are refused, and it returns once no
 * remote request is still moving its bytes (or, after a bounded wait, once the connections carrying them were
 * closed). Memory the caller registered stays the caller's to free, after close; memory the engine created for a
 * shared region ({@link TransferEngine#registerShared}) is freed by close.
 */
public final class LocalRegion implements AutoCloseable {
    private final TransferEngine engine;
    private final String name;
    private final int id;
    private final MemorySegment memory;
    private final Optional<Path> shmFile;
    private final Runnable free;
    private final MemoryKind kind;
    private final Served served = new Served();
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition idle = lock.newCondition();
    /** What the transports returned from registering it; set once, before peers can see the region. */
    private volatile Map<String, String> keys = Map.of();

    private int inFlight;
    private boolean retired;

    LocalRegion(
            TransferEngine engine,
            String name,
            int id,
            MemorySegment memory,
            MemoryKind kind,
            Optional<Path> shmFile,
            Runnable free) {
        this.engine = engine;
        this.kind = kind;
        this.free = free;
        this.name = name;
        this.id = id;
        this.memory = memory;
        this.shmFile = shmFile;
    }

    /** The region's name in its segment. */
    public String name() {
        return name;
    }

    /** The number peers address it by. */
    public int id() {
        return id;
    }

    /**
     * Its memory. For a device region ({@link TransferEngine#registerDevice}) a segment that only carries the device
     * address and length: the CPU must not read or write it.
     */
    public MemorySegment memory() {
        return memory;
    }

    /** Where its bytes live. */
    public MemoryKind kind() {
        return kind;
    }

    /** The shared-memory file that holds it, for regions a same-host peer may map. */
    public Optional<Path> shmFile() {
        return shmFile;
    }

    /** What the segment publishes about it. */
    public RegionDescriptor descriptor() {
        return new RegionDescriptor(
                name, id, memory.byteSize(), shmFile.map(Path::toString).orElse(""), keys, kind);
    }

    /** The view transports serve peers' requests through. */
    RegisteredRegion served() {
        return served;
    }

    void publish(Map<String, String> transportKeys) {
        this.keys = Map.copyOf(transportKeys);
    }

    /** Refuses new requests, then waits up to {@code millis} for those in flight; true if none is left. */
    boolean retire(long millis) {
        lock.lock();
        try {
            retired = true;
            long nanos = TimeUnit.MILLISECONDS.toNanos(millis);
            while (inFlight > 0 && nanos > 0) {
                nanos = idle.awaitNanos(nanos);
            }
            return inFlight == 0;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return inFlight == 0;
        } finally {
            lock.unlock();
        }
    }

    /** Frees what the engine allocated for it, after it was retired. */
    void free() {
        free.run();
    }

    /** Unregisters the region (see the class comment). Idempotent. */
    @Override
    public void close() {
        engine.unregister(this);
    }

    @Override
    public String toString() {
        return "region " + name + " (#" + id + ", " + memory.byteSize() + " bytes"
                + (kind == MemoryKind.DEVICE ? ", device memory" : "")
                + shmFile.map(p -> ", " + p).orElse("") + ")";
    }

    /** The region as transports see it: its memory and the in-flight count that unregistering waits on. */
    private final class Served implements RegisteredRegion {
        @Override
        public String name() {
            return name;
        }

        @Override
        public int id() {
            return id;
        }

        @Override
        public MemorySegment memory() {
            return memory;
        }

        @Override
        public MemoryKind kind() {
            return kind;
        }

        @Override
        public boolean acquire() {
            lock.lock();
            try {
                if (retired) {
                    return false;
                }
                inFlight++;
                return true;
            } finally {
                lock.unlock();
            }
        }

        @Override
        public void release() {
            lock.lock();
            try {
                if (--inFlight == 0) {
                    idle.signalAll();
                }
            } finally {
                lock.unlock();
            }
        }

        @Override
        public String toString() {
            return LocalRegion.this.toString();
        }
    }
}
