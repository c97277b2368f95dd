package io.hicache.transfer;

/**
 * Receives messages that peers send with {@link RemoteSegment#send}. Called on an I/O thread: it must return
 * quickly and never block; hand longer work to another thread.
 */
@FunctionalInterface
public interface MessageListener {
    /** A message from the engine named {@code from}. */
    void onMessage(String from, byte[] payload);
}
