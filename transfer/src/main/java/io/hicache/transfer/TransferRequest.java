package io.hicache.transfer;

import io.hicache.transfer.spi.TransferOp;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * One request of a batch: move {@code local.byteSize()} bytes between {@code local} and the remote segment's region
 * {@code remoteRegion} at {@code remoteOffset}. {@code local} must lie inside a region registered with the
 * submitting engine (as RDMA requires: only registered memory can be the source or target of a transfer).
 *
 * @param op           read (remote to local) or write (local to remote)
 * @param local        the local bytes; the caller keeps them alive until the request is final
 * @param remoteRegion the name of a region the remote segment published
 * @param remoteOffset where in that region
 */
public record TransferRequest(TransferOp op, MemorySegment local, String remoteRegion, long remoteOffset) {
    public TransferRequest {
        Objects.requireNonNull(op, "op");
        Objects.requireNonNull(local, "local");
        Objects.requireNonNull(remoteRegion, "remoteRegion");
        if (remoteOffset < 0) {
            throw new IllegalArgumentException("remoteOffset must be >= 0, got " + remoteOffset);
        }
        if (local.byteSize() == 0) {
            throw new IllegalArgumentException("a transfer request must move at least one byte");
        }
    }

    /** A read of {@code local.byteSize()} bytes from {@code region} at {@code offset} into {@code local}. */
    public static TransferRequest read(MemorySegment local, String region, long offset) {
        return new TransferRequest(TransferOp.READ, local, region, offset);
    }

    /** A write of {@code local} into {@code region} at {@code offset}. */
    public static TransferRequest write(MemorySegment local, String region, long offset) {
        return new TransferRequest(TransferOp.WRITE, local, region, offset);
    }

    /** Bytes moved. */
    public long bytes() {
        return local.byteSize();
    }
}
