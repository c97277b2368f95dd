package io.hicache.transfer.spi;

import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * The unit a transport moves: a contiguous piece of one request, between registered local memory and a remote
 * region. One-sided by shape, as an RDMA work request: the remote side's CPU takes no decision about it beyond
 * checking the range.
 *
 * <p>A transport calls {@link Listener#sliceDone} exactly once per slice it was given, from any thread, and only
 * when no byte of the slice is still moving.
 */
public interface Slice {
    /** Read or write. */
    TransferOp op();

    /** The local bytes (registered memory). */
    MemorySegment local();

    /** The remote region. */
    RegionDescriptor region();

    /** Offset in the remote region. */
    long remoteOffset();

    /** False once the batch no longer wants it (cancelled or past its deadline): a slice not yet sent is dropped. */
    boolean wanted();

    /** Decrements and returns the retries left, for transports that move a failed slice elsewhere. */
    int takeRetry();

    /** Reports the end of the slice: {@code failure} is null when it moved, else why it did not. */
    void done(@Nullable String failure);

    /** Receives slice completions. */
    @FunctionalInterface
    interface Listener {
        void sliceDone(Slice slice, String failure);
    }
}
