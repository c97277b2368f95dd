package io.hicache.cuda;

import io.hicache.core.util.Checks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * Device memory for the page index lists of a stream's copies, with a pinned host mirror to stage them: each copy
 * takes a region, writes its list into the mirror and enqueues an asynchronous upload ahead of its launches, and
 * gives the region back when the copy completes (by then the upload has long run, so the mirror can be rewritten).
 * Copies on one stream complete in order, so regions come back in the order they were taken: a ring. A copy waits
 * for room rather than reuse memory a kernel may still read.
 *
 * <p>Thread-safe. The owning stream frees it.
 */
final class IndexRing implements AutoCloseable {
    private final DevicePointer memory = new DevicePointer();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment mirror;
    private final long capacityInts;
    private final ArrayDeque<long[]> taken = new ArrayDeque<>();
    private long head;
    private long used;

    IndexRing(long capacityInts) {
        this.capacityInts = Checks.checkPositive(capacityInts, "capacityInts");
        long bytes = capacityInts * Integer.BYTES;
        this.mirror = arena.allocate(bytes, 4096);
        try {
            JCudaDriver.cuMemAlloc(memory, bytes);
            JCudaDriver.cuMemHostRegister(RawPointers.host(mirror.address()), bytes, 0);
        } catch (RuntimeException e) {
            if (memory.address() != 0) {
                JCudaDriver.cuMemFree(memory);
            }
            arena.close();
            throw e;
        }
    }

    /**
     * Takes a region for {@code indices} and enqueues their upload on {@code stream}; waits while the ring is too full.
     * Work enqueued on {@code stream} after this call sees the indices.
     *
     * @return the region's device address
     * @throws IllegalArgumentException when the list is larger than the whole ring
     */
    long upload(int[] indices, CUstream stream) throws InterruptedException {
        long n = indices.length;
        Checks.requireArgument(n <= capacityInts, "%d page indices do not fit an index ring of %d", n, capacityInts);
        long start;
        long previousHead;
        synchronized (this) {
            while (true) {
                start = head + n <= capacityInts ? head : 0;
                long wasted = start == 0 && head != 0 ? capacityInts - head : 0;
                if (used + wasted + n <= capacityInts) {
                    previousHead = head;
                    used += wasted + n;
                    head = start + n;
                    taken.addLast(new long[] {wasted + n});
                    break;
                }
                wait();
            }
        }
        long offset = start * Integer.BYTES;
        try {
            MemorySegment.copy(indices, 0, mirror, ValueLayout.JAVA_INT, offset, indices.length);
            JCudaDriver.cuMemcpyHtoDAsync(
                    memory.withByteOffset(offset),
                    RawPointers.host(mirror.address() + offset),
                    n * Integer.BYTES,
                    stream);
        } catch (RuntimeException e) {
            synchronized (this) {
                // Nothing ran with this region: give it back (it is the newest, under the stream's lock).
                used -= taken.pollLast()[0];
                head = previousHead;
                notifyAll();
            }
            throw e;
        }
        return memory.address() + offset;
    }

    /** Gives back the oldest region. */
    synchronized void releaseOldest() {
        long[] region = taken.pollFirst();
        if (region != null) {
            used -= region[0];
            if (taken.isEmpty()) {
                head = 0;
                used = 0;
            }
            notifyAll();
        }
    }

    @Override
    public void close() {
        JCudaDriver.cuMemFree(memory);
        JCudaDriver.cuMemHostUnregister(RawPointers.host(mirror.address()));
        arena.close();
    }
}
