package io.hicache.server.daemon;

/**
 * A LEADING_HITS could not finish before its deadline: answered ERROR TIMED_OUT with this message, never with a count
 * that would not be true. (CLEAR and CLEAR_ALL, the other requests without per-page statuses, answer TIMED_OUT at
 * their deadline while their L3 part goes on: {@link L3Clears}.)
 */
final class NotDoneInTime extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotDoneInTime(String message) {
        super(message, null, false, false);
    }
}
