package io.hicache.transfer.pd;

import org.jspecify.annotations.Nullable;

/**
 * One end of a request's KV handoff, as SGLang's sender and receiver objects are: the room it is for, its state and
 * why it failed. {@link KvSender} is the prefill's end, {@link KvReceiver} the decode's.
 *
 * <p>Thread-safe: the state is the rank's, read as it stands. Closing lets the rank forget the room (once nothing of
 * it moves any more); the rank stays the caller's.
 */
public abstract sealed class KvHandoff implements AutoCloseable permits KvSender, KvReceiver {
    private final RoomState state;

    KvHandoff(RoomState state) {
        this.state = state;
    }

    /** The room id. */
    public final long room() {
        return state.id;
    }

    /** The handoff state. */
    public final KvPoll poll() {
        return state.state;
    }

    /** Why the handoff failed, or null. */
    public final @Nullable String failureReason() {
        return state.reason;
    }

    /** Lets the rank forget the room. */
    @Override
    public abstract void close();
}
