package io.hicache.transfer;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;

/** A transfer engine operation that could not be done: a peer that cannot be reached, a region that is unknown. */
public final class TransferException extends HiCacheException {
    private static final long serialVersionUID = 1L;

    public TransferException(ErrorCode code, String message) {
        super(code, message);
    }

    public TransferException(ErrorCode code, String message, Throwable cause) {
        super(code, message, cause);
    }

    /** A peer that cannot be reached or an engine that is closed. */
    public static TransferException unavailable(String message) {
        return new TransferException(ErrorCode.TRANSFER_UNAVAILABLE, message);
    }

    /** A request or handshake the peer refused. */
    public static TransferException refused(String message) {
        return new TransferException(ErrorCode.TRANSFER_REFUSED, message);
    }
}
