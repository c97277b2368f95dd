package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.util.List;

/**
 * A prepared descriptor list (NIXL's {@code prepXferDlist}): descriptors of one memory type over this agent's
 * registrations, checked once so that transfers made from it by index skip the checks. Immutable.
 */
final class XferDescList {
    private final MemoryType type;
    private final List<XferDesc> descs;

    XferDescList(MemoryType type, List<XferDesc> descs) {
        this.type = type;
        this.descs = List.copyOf(descs);
    }

    public MemoryType type() {
        return type;
    }

    public int size() {
        return descs.size();
    }

    public XferDesc get(int index) {
        return descs.get(index);
    }

    List<XferDesc> descs() {
        return descs;
    }

    /** The descriptors at {@code indices}, in that order. */
    List<XferDesc> select(int[] indices) {
        XferDesc[] picked = new XferDesc[indices.length];
        for (int i = 0; i < indices.length; i++) {
            if (indices[i] < 0 || indices[i] >= descs.size()) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM, "index " + indices[i] + " is outside a list of " + descs.size());
            }
            picked[i] = descs.get(indices[i]);
        }
        return List.of(picked);
    }
}
