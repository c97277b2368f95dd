package io.hicache.storage.nixl.spi;

/**
 * Status and error codes, modelled on NIXL's {@code nixl_status_t} list, with one addition: {@link #ERR_TIMED_OUT},
 * for a transfer stopped by its own stall deadline (NIXL has none and transfers can stay in progress forever; its
 * users ask for one). A transfer's polled status is {@link #IN_PROG}, {@link #SUCCESS}, {@link #NOT_POSTED} or one of
 * the errors; misuse of the API throws {@link NixlException} with the code.
 */
public enum NixlStatus {
    /** Posted and not finished. */
    IN_PROG,
    /** Finished, every descriptor moved. */
    SUCCESS,
    /** Prepared but never posted. */
    NOT_POSTED,
    /** A bad argument: a descriptor outside its region, a released handle, lists of different lengths. */
    ERR_INVALID_PARAM,
    /** The plugin's I/O failed (the detail says how). */
    ERR_BACKEND,
    /** A file or object that does not exist; an unknown plugin. */
    ERR_NOT_FOUND,
    /** A stored file or object whose size is not the registered length. */
    ERR_MISMATCH,
    /** An operation the region's modes do not allow (a write to a read-only file). */
    ERR_NOT_ALLOWED,
    /** A post of a request whose previous post is still in progress. */
    ERR_REPOST_ACTIVE,
    /** Anything else. */
    ERR_UNKNOWN,
    /** No plugin serves the memory types, or the plugin cannot do what was asked. */
    ERR_NOT_SUPPORTED,
    /** The far side went away (network plugins; none here). */
    ERR_REMOTE_DISCONNECT,
    /** Cancelled, or released while in progress. */
    ERR_CANCELED,
    /** No telemetry was enabled. */
    ERR_NO_TELEMETRY,
    /** Not in NIXL: the transfer passed the stall deadline given when it was posted. */
    ERR_TIMED_OUT;

    /** Whether this is a final status of a posted transfer (success or an error). */
    public boolean isFinal() {
        return this != IN_PROG && this != NOT_POSTED;
    }

    /** Whether this is an error. */
    public boolean isError() {
        return name().startsWith("ERR_");
    }
}
