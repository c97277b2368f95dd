package io.hicache.storage.nixl.spi;

import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * One descriptor as a backend sees it: {@code length} bytes at {@code offset} of a registered region, with the
 * backend's state for that region. Immutable.
 */
public record Piece(MemoryRegion region, @Nullable Object state, long offset, long length) {
    /** The bytes of a DRAM piece. */
    public MemorySegment dram() {
        if (!(region instanceof MemoryRegion.Dram d)) {
            throw new NixlException(NixlStatus.ERR_NOT_SUPPORTED, "not host memory: " + region.type());
        }
        return d.segment().asSlice(offset, length);
    }
}
