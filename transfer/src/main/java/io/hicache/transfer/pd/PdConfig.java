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
 * @param workerSpinMicros         prefill: how long the rank's thread spins, once a room's last chunk went out on
 *                                 the device path, for the news that its writes ended (0: it sleeps at once): such a
 *                                 handoff takes about a millisecond, and a thread woken from a sleep sees its end tens
 *                                 of microseconds late; the spin ends as soon as any other work is due, 0 to 100,000
 */
public record PdConfig(
        long bootstrapTimeoutMillis,
        long waitingTimeoutMillis,
        long chunkDeadlineMillis,
        long heartbeatMillis,
        int heartbeatMaxFailures,
        long abortAckTimeoutMillis,
        long lookupTimeoutMillis,
        long workerSpinMicros) {
    /** The default of {@link #workerSpinMicros}. */
    public static final long DEFAULT_WORKER_SPIN_MICROS = 2_000;

    public PdConfig {
        positive(bootstrapTimeoutMillis, "bootstrapTimeoutMillis");
        positive(waitingTimeoutMillis, "waitingTimeoutMillis");
        positive(chunkDeadlineMillis, "chunkDeadlineMillis");
        positive(heartbeatMillis, "heartbeatMillis");
        positive(heartbeatMaxFailures, "heartbeatMaxFailures");
        positive(abortAckTimeoutMillis, "abortAckTimeoutMillis");
        positive(lookupTimeoutMillis, "lookupTimeoutMillis");
        if (workerSpinMicros < 0 || workerSpinMicros > 100_000) {
            throw new IllegalArgumentException("pd: workerSpinMicros must be 0 to 100000, got " + workerSpinMicros);
        }
    }

    private static void positive(long v, String name) {
        if (v <= 0) {
            throw new IllegalArgumentException("pd: " + name + " must be > 0, got " + v);
        }
    }

    /**
     * SGLang's defaults: 300 s bootstrap and waiting timeouts, 5 s heartbeat, 2 failures; 30 s chunks; the worker spins
     * up to {@value #DEFAULT_WORKER_SPIN_MICROS} us.
     */
    public static PdConfig defaults() {
        return new PdConfig(300_000, 300_000, 30_000, 5_000, 2, 45_000, 5_000, DEFAULT_WORKER_SPIN_MICROS);
    }
}
