package io.hicache.server.daemon;

import io.hicache.core.util.Checks;

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

    /** Never null: always made with one, which the request is answered with. */
    @Override
    public String getMessage() {
        return Checks.checkNotNull(super.getMessage(), "the message");
    }
}
