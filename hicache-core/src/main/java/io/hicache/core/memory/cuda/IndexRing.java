package io.hicache.core.memory.cuda;

import io.hicache.core.util.Checks;
import java.util.ArrayDeque;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;

/**
 * Device memory for the page index lists of a stream's copies: each copy takes a region, filled by a synchronous
 * upload, and gives it back when the copy completes. Copies on one stream complete in order, so regions come back
 * in the order they were taken: a ring. A copy waits for room rather than reuse memory a kernel may still read.
 *
 * <p>Thread-safe. The owning stream frees it.
 */
final class IndexRing implements AutoCloseable {
    private final RawPointers.DeviceAllocation memory = RawPointers.newDeviceAllocation();
    private final long capacityInts;
    private final ArrayDeque<long[]> taken = new ArrayDeque<>();
    private long head;
    private long used;

    IndexRing(long capacityInts) {
        this.capacityInts = Checks.checkPositive(capacityInts, "capacityInts");
        JCudaDriver.cuMemAlloc(memory, capacityInts * Integer.BYTES);
    }

    /**
     * Takes a region for {@code indices} and uploads them; waits while the ring is too full.
     *
     * @return the region's device address
     * @throws IllegalArgumentException when the list is larger than the whole ring
     */
    long upload(int[] indices) throws InterruptedException {
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
        try {
            JCudaDriver.cuMemcpyHtoD(memory.withByteOffset(start * Integer.BYTES), Pointer.to(indices), n * Integer.BYTES);
        } catch (RuntimeException e) {
            synchronized (this) {
                // Nothing ran with this region: give it back (it is the newest, under the stream's lock).
                used -= taken.pollLast()[0];
                head = previousHead;
                notifyAll();
            }
            throw e;
        }
        return memory.address() + start * Integer.BYTES;
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
    }
}
