package io.hicache.core;

/**
 * Why an operation failed, grouped by subsystem in ranges of 100 so a code alone says where to look.
 * Codes are stable: they appear in logs, in the daemon's protocol and in metrics labels.
 */
public enum ErrorCode {
    /** A setting is missing, malformed, unknown or contradicts another one. */
    CONFIG_INVALID(100),

    /** No page store is registered under the requested name. */
    STORE_UNKNOWN(200),
    /** The page store was closed; it accepts no more operations. */
    STORE_CLOSED(201),
    /** The page store could not be opened or reached (missing bucket, bad credentials, unreadable folder). */
    STORE_UNAVAILABLE(202),
    /** The page store failed an operation as a whole (not a per-page outcome). */
    STORE_IO(203),

    /** No device runtime can run here, or the device cannot be used (no driver, no such device). */
    DEVICE_UNAVAILABLE(300),
    /** A KV pool does not fit in the device's free memory. */
    DEVICE_OUT_OF_MEMORY(301),
    /** A copy between host and device memory failed. */
    COPY_FAILED(302),
    /** A page allocator has fewer free pages than were asked for. */
    PAGES_EXHAUSTED(303),

    /** The host page pool's slab or index cannot be created, mapped or opened. */
    HOST_POOL_UNAVAILABLE(400),
    /** The host page pool would not fit in the tmpfs or in memory. */
    HOST_POOL_TOO_LARGE(401),
    /** Another process has the host page pool open. */
    HOST_POOL_IN_USE(402),

    /** A transfer peer cannot be reached, or a transfer engine is closed. */
    TRANSFER_UNAVAILABLE(500),
    /** A transfer peer refused a request: an unknown region, a range outside it, an incompatible handshake. */
    TRANSFER_REFUSED(501),

    /**
     * A rank group cannot agree any more: a rank died, left, called out of step, or did not call before the deadline.
     * Permanent for that group.
     */
    RANK_GROUP_FAILED(600),

    /** An internal invariant broke; this is a bug in HiCache. */
    INTERNAL(900);

    private final int number;

    ErrorCode(int number) {
        this.number = number;
    }

    /** The stable numeric form, for wire protocols and metrics. */
    public int number() {
        return number;
    }
}
