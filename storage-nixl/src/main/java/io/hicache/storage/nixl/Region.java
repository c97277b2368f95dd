package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * One registered region: the handle {@link NixlAgent#register} gives for each {@link MemoryRegion}, from which
 * transfer descriptors are cut. Holds each serving backend's state for the region. Immutable; valid until its
 * {@link Registration} is deregistered.
 */
final class Region {
    private final Registration owner;
    private final MemoryRegion memory;
    /** A backend's state may be null: {@link NixlBackend#register} returns null when it needs none. */
    private final Map<NixlBackend, @Nullable Object> states;

    Region(Registration owner, MemoryRegion memory, Map<NixlBackend, @Nullable Object> states) {
        this.owner = owner;
        this.memory = memory;
        this.states = states;
    }

    /** What was registered. */
    public MemoryRegion memory() {
        return memory;
    }

    public MemoryType type() {
        return memory.type();
    }

    public long length() {
        return memory.length();
    }

    /** Whether its registration is still in force. */
    public boolean isRegistered() {
        return owner.isRegistered();
    }

    /**
     * A descriptor of {@code length} bytes at {@code offset}.
     *
     * @throws NixlException {@link NixlStatus#ERR_INVALID_PARAM} when the range is empty or not inside the region
     */
    public XferDesc slice(long offset, long length) {
        if (offset < 0 || length <= 0 || offset > memory.length() - length) {
            throw new NixlException(
                    NixlStatus.ERR_INVALID_PARAM,
                    "descriptor [" + offset + ", +" + length + ") is not " + "inside the " + memory.length() + "-byte "
                            + memory.type() + " region");
        }
        return new XferDesc(this, offset, length);
    }

    /** A descriptor of the whole region. */
    public XferDesc whole() {
        return new XferDesc(this, 0, memory.length());
    }

    Registration owner() {
        return owner;
    }

    /** The backend's state, or null when the backend does not serve this region. */
    @Nullable
    Object stateFor(NixlBackend backend) {
        return states.get(backend);
    }

    Map<NixlBackend, @Nullable Object> states() {
        return states;
    }

    @Override
    public String toString() {
        return memory.toString();
    }
}
