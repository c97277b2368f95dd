package io.hicache.transfer.shm;

import io.hicache.transfer.spi.PeerContext;
import io.hicache.transfer.spi.RegionDescriptor;
import io.hicache.transfer.spi.Slice;
import io.hicache.transfer.spi.TransferOp;
import io.hicache.transfer.spi.TransportLink;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The shared-memory path to one peer: the peer's region files mapped once, on first use, and slices copied on
 * the transport's copy threads. A slice whose peer was declared dead, or whose batch no longer wants it, fails
 * before its copy starts; a copy in progress is at most one slice long, so a request becomes final promptly.
 *
 * <p>Thread-safe. Closing waits (bounded) for copies in progress, then unmaps.
 */
final class ShmLink implements TransportLink {
    private final PeerContext peer;
    private final ExecutorService copiers;
    private final long closeWaitMillis;
    private final Arena arena = Arena.ofShared();
    private final Map<Integer, MemorySegment> mapped = new ConcurrentHashMap<>();
    private final AtomicInteger running = new AtomicInteger();
    private volatile boolean closed;

    ShmLink(PeerContext peer, ExecutorService copiers, long closeWaitMillis) {
        this.peer = peer;
        this.copiers = copiers;
        this.closeWaitMillis = closeWaitMillis;
    }

    @Override
    public void submit(Slice slice) {
        try {
            copiers.execute(() -> copy(slice));
        } catch (RejectedExecutionException e) {
            slice.done("the shared-memory transport is closed");
        }
    }

    private void copy(Slice slice) {
        running.incrementAndGet();
        String failure = null;
        try {
            if (closed) {
                failure = "the link to " + peer.remote().name() + " is closed";
            } else if (!peer.alive()) {
                failure = "peer " + peer.remote().name() + " is dead: " + peer.deathReason();
            } else if (!slice.wanted()) {
                failure = "not wanted any more";
            } else if (!Files.exists(Path.of(slice.region().shmPath()))) {
                // the owner unregistered the region (its file is deleted on close): an old mapping would still
                // accept the copy, into memory nobody reads
                failure = "region " + slice.region().name() + " of "
                        + peer.remote().name() + " was unregistered";
            } else {
                MemorySegment remote = map(slice.region())
                        .asSlice(slice.remoteOffset(), slice.local().byteSize());
                if (slice.op() == TransferOp.READ) {
                    MemorySegment.copy(remote, 0, slice.local(), 0, remote.byteSize());
                } else {
                    MemorySegment.copy(slice.local(), 0, remote, 0, remote.byteSize());
                }
            }
        } catch (IOException | RuntimeException e) {
            failure = "shared-memory copy failed: " + e;
        } finally {
            running.decrementAndGet();
        }
        slice.done(failure);
    }

    private MemorySegment map(RegionDescriptor region) throws IOException {
        MemorySegment m = mapped.get(region.id());
        if (m != null) {
            return m;
        }
        synchronized (this) {
            m = mapped.get(region.id());
            if (m == null) {
                try (FileChannel ch = FileChannel.open(
                        Path.of(region.shmPath()), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                    if (ch.size() < region.bytes()) {
                        throw new IOException(region.shmPath() + " has " + ch.size() + " bytes, the peer published "
                                + region.bytes());
                    }
                    m = ch.map(FileChannel.MapMode.READ_WRITE, 0, region.bytes(), arena);
                }
                mapped.put(region.id(), m);
            }
            return m;
        }
    }

    @Override
    public void abandon(Slice slice) {
        // a copy in progress ends within one slice; nothing to tear down
    }

    @Override
    public void close() {
        closed = true;
        long until = System.nanoTime() + closeWaitMillis * 1_000_000L;
        while (running.get() > 0 && System.nanoTime() - until < 0) {
            Thread.onSpinWait();
            Thread.yield();
        }
        synchronized (this) {
            mapped.clear();
            arena.close();
        }
    }
}
