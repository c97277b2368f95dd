package io.hicache.transfer.spi;

import org.jspecify.annotations.Nullable;

/** What a transport learns about the peer it links to. Thread-safe; implemented by the engine. */
public interface PeerContext {
    /** The peer's published segment. */
    SegmentDescriptor remote();

    /** Whether the engine still considers the peer alive (its control connection answers heartbeats). */
    boolean alive();

    /** Why the peer is considered dead, or null while it is alive. */
    @Nullable
    String deathReason();
}
