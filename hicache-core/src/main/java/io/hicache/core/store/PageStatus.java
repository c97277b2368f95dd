package io.hicache.core.store;

import io.hicache.core.Deadline;

/**
 * The outcome for one page of a batch. A batch never throws because some of its pages failed: each page
 * gets its own status.
 */
public enum PageStatus {
    /** get: the page was copied into the target and verified. put: stored. delete: removed. */
    OK,
    /** put: the key was already stored, nothing was written (pages are immutable under their key). */
    EXISTS,
    /** get, delete: no page under this key. The get target is untouched. */
    MISS,
    /** get: a page was found but failed its checksum. A miss: the target's bytes must not be used. */
    CORRUPT,
    /** get: the stored page's length differs from the target's. The target is untouched. */
    SIZE_MISMATCH,
    /** put: the store refused the page (full, over a quota). */
    REJECTED,
    /** The deadline passed before this page was done. A get's target bytes are undefined. */
    TIMED_OUT,
    /** The deadline was cancelled before this page was done. A get's target bytes are undefined. */
    CANCELLED,
    /** An I/O or server error; the result's detail says which. A get's target bytes are undefined. */
    FAILED;

    /** True for the outcomes that leave the page stored (put) or delivered (get): OK and EXISTS. */
    public boolean isSuccess() {
        return this == OK || this == EXISTS;
    }

    /** The status for work not done because {@code deadline} is over: CANCELLED or TIMED_OUT. */
    public static PageStatus stoppedBy(Deadline deadline) {
        return deadline.isCancelled() ? CANCELLED : TIMED_OUT;
    }
}
