package io.hicache.transfer.spi;

import org.jspecify.annotations.Nullable;

/**
 * This engine's own segment as a transport sees it: its regions by the id peers address them with, and where a
 * transport reports the connections peers hold into it. Thread-safe; implemented by the engine.
 */
public interface LocalSegment {
    /**
     * The host region peers address as {@code id}, or null when none is registered under it. Device regions are
     * never served this way (the CPU cannot touch them): a transport that moves device memory gets them from
     * {@link Transport#register}.
     */
    @Nullable
    RegisteredRegion region(int id);

    /**
     * A connection from the engine named {@code peer} that can carry its writes into this segment opened
     * ({@code +1}) or closed ({@code -1}). The engine counts them per peer: a dead peer with none left can no longer
     * write here.
     */
    void inbound(String peer, int delta);
}
