package io.hicache.server.daemon;

/**
 * A request whose answer has no per-page status (LEADING_HITS, CLEAR, CLEAR_ALL) could not finish before its deadline:
 * answered ERROR TIMED_OUT with this message, never with a count or an acknowledgement that would not be true.
 */
final class NotDoneInTime extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotDoneInTime(String message) {
        super(message, null, false, false);
    }
}
