package io.hicache.transfer.spi;

import java.util.List;

/**
 * A transport's path to one opened remote segment. Thread-safe: slices may be submitted from any thread.
 * Closed by the engine when the remote segment is closed; closing fails the slices it still holds.
 */
public interface TransportLink extends AutoCloseable {
    /** Takes a slice; its completion is reported through {@link Slice#done}. Never blocks on the network. */
    void submit(Slice slice);

    /**
     * Takes the slices of one submission that go over this link, in order, as {@link #submit} each would: a link that
     * moves many small slices cheaper together (one kernel launch for a batch of device copies) overrides it.
     */
    default void submitAll(List<? extends Slice> slices) {
        for (Slice s : slices) {
            submit(s);
        }
    }

    /**
     * Asks that {@code slice}, which its batch no longer wants, be resolved promptly, even at the cost of tearing
     * down the connection that carries it. A link for which in-flight slices end quickly anyway may ignore it.
     */
    void abandon(Slice slice);

    @Override
    void close();
}
