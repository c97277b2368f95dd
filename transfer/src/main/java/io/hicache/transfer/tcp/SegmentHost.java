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
}
