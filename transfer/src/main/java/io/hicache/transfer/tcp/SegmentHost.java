package io.hicache.transfer.tcp;

import io.hicache.transfer.LocalRegion;

/**
 * What the listener serves: the engine's regions, its descriptor and its message inbox. Implemented by the engine;
 * internal to the transfer module. Thread-safe.
 */
public interface SegmentHost {
    /** The region with wire id {@code id}, or null. */
    LocalRegion region(int id);

    /** The segment's descriptor, encoded. */
    byte[] describe();

    /** A message from the peer that said hello as {@code from}. */
    void message(String from, byte[] payload);

    /** A connection from the engine named {@code from} opened ({@code +1}) or closed ({@code -1}). */
    void connected(String from, int delta);
}
