package io.hicache.transfer.pd;

/**
 * The state of one request's KV handoff, as SGLang's {@code KVPoll}: ordered so that the slowest of several ranks is
 * the minimum. Moves only forward, except that {@link #FAILED} overrides everything and is final.
 */
public enum KvPoll {
    FAILED,
    BOOTSTRAPPING,
    WAITING_FOR_INPUT,
    TRANSFERRING,
    SUCCESS;

    /** Whether nothing will change any more. */
    public boolean isFinal() {
        return this == FAILED || this == SUCCESS;
    }
}
