package io.hicache.transfer;

/**
 * The state of one request of a {@link TransferBatch}. Every state but {@link #PENDING} is final. A request leaves
 * {@link #PENDING} only when none of its bytes is still moving, so once a request is final its local memory is no
 * longer touched by the engine.
 */
public enum RequestState {
    /** Not finished. */
    PENDING,
    /** All bytes moved and, for a write, acknowledged by the remote side. */
    DONE,
    /** Gave up; {@link TransferBatch#reason(int)} says why. Bytes of the range are undefined. */
    FAILED,
    /** Cancelled before it finished. Bytes of the range are undefined. */
    CANCELLED,
    /** The batch's deadline passed before it finished. Bytes of the range are undefined. */
    TIMED_OUT;

    /** Whether the state is final. */
    public boolean isFinal() {
        return this != PENDING;
    }
}
