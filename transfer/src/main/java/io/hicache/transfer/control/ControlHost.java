package io.hicache.transfer.control;

/**
 * What the control listener serves: the engine's descriptor and its message inbox, and where it reports the control
 * connections peers hold. Implemented by the engine. Thread-safe: called on event loop threads, so every method
 * returns quickly and never blocks.
 */
public interface ControlHost {
    /** The segment's descriptor, encoded. */
    byte[] describe();

    /** A message from the peer that said hello as {@code from}. */
    void message(String from, byte[] payload);

    /** A control connection from the engine named {@code from} opened ({@code +1}) or closed ({@code -1}). */
    void connected(String from, int delta);
}
