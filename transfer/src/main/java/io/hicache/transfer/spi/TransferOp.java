package io.hicache.transfer.spi;

/** What a transfer request does, seen from the side that submits it. */
public enum TransferOp {
    /** Pulls bytes from the remote segment into local memory. */
    READ,
    /** Pushes bytes from local memory into the remote segment; done only after the remote side applied them. */
    WRITE
}
