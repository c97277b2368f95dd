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
