package io.hicache.transfer.pd;

import org.jspecify.annotations.Nullable;

/**
 * What both ends of a handoff know of one room: its id, when this rank first heard of it, its poll state and why it
 * failed. The state moves only forward; {@link KvPoll#FAILED} overrides it and is final.
 *
 * <p>{@link #state} and {@link #reason} are read from any thread (by {@link KvHandoff}); they, and every field of the
 * subclasses, are written by the owning rank's worker thread only.
 */
abstract class RoomState {
    final long id;
    final long createdNanos = System.nanoTime();
    volatile KvPoll state = KvPoll.BOOTSTRAPPING;
    volatile @Nullable String reason;

    RoomState(long id) {
        this.id = id;
    }

    /** Moves the state forward to {@code to}; a failed room stays failed, and no state moves back. */
    final void advance(KvPoll to) {
        if (state != KvPoll.FAILED && to.compareTo(state) > 0) {
            state = to;
        }
    }

    /** Fails the room with {@code why}, unless it failed already: true if this call failed it. */
    final boolean failWith(String why) {
        if (state == KvPoll.FAILED) {
            return false;
        }
        reason = why; // before the state: whoever sees FAILED sees why
        state = KvPoll.FAILED;
        return true;
    }
}
