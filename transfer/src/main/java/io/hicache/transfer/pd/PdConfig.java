package io.hicache.transfer.pd;

/**
 * Timeouts of the prefill/decode protocol, validated once. Every wait of the protocol is bounded by one of these.
 *
 * @param bootstrapTimeoutMillis   prefill: a request with no destination from decode after this fails
 * @param waitingTimeoutMillis     decode: a request not finished this long after its destination was sent fails
 * @param chunkDeadlineMillis      deadline of each chunk's transfer batch
 * @param heartbeatMillis          decode: how often it checks each prefill bootstrap server's health
 * @param heartbeatMaxFailures     decode: consecutive failed checks that declare a prefill dead
 * @param abortAckTimeoutMillis    decode: how long an abort waits for the prefill's acknowledgement before the
 *                                 pages are quarantined rather than released
 * @param lookupTimeoutMillis      one bootstrap request or segment open
 */
public record PdConfig(
        long bootstrapTimeoutMillis,
        long waitingTimeoutMillis,
        long chunkDeadlineMillis,
        long heartbeatMillis,
        int heartbeatMaxFailures,
        long abortAckTimeoutMillis,
        long lookupTimeoutMillis) {
    public PdConfig {
        positive(bootstrapTimeoutMillis, "bootstrapTimeoutMillis");
        positive(waitingTimeoutMillis, "waitingTimeoutMillis");
        positive(chunkDeadlineMillis, "chunkDeadlineMillis");
        positive(heartbeatMillis, "heartbeatMillis");
        positive(heartbeatMaxFailures, "heartbeatMaxFailures");
        positive(abortAckTimeoutMillis, "abortAckTimeoutMillis");
        positive(lookupTimeoutMillis, "lookupTimeoutMillis");
    }

    private static void positive(long v, String name) {
        if (v <= 0) {
            throw new IllegalArgumentException("pd: " + name + " must be > 0, got " + v);
        }
    }

    /** SGLang's defaults: 300 s bootstrap and waiting timeouts, 5 s heartbeat, 2 failures; 30 s chunks. */
    public static PdConfig defaults() {
        return new PdConfig(300_000, 300_000, 30_000, 5_000, 2, 45_000, 5_000);
    }
}
