package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryRegion;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;

/**
 * Host memory registered once for the store's life (the L2 slab), and the lookup that turns a page inside it into a
 * descriptor without a registration of its own. Thread-safe; the agent deregisters the regions when it closes.
 */
final class HostRegions {
    private final NixlAgent agent;
    private final List<Region> regions = new CopyOnWriteArrayList<>();

    HostRegions(NixlAgent agent) {
        this.agent = agent;
    }

    void add(MemorySegment memory) {
        regions.add(agent.register(new MemoryRegion.Dram(memory)).region(0));
    }

    /** A descriptor of {@code page} inside a registered region, or null when it is in none. */
    @Nullable
    XferDesc descOf(MemorySegment page) {
        for (Region r : regions) {
            MemorySegment host = ((MemoryRegion.Dram) r.memory()).segment();
            long offset = page.address() - host.address();
            if (offset >= 0 && offset + page.byteSize() <= host.byteSize()) {
                return r.slice(offset, page.byteSize());
            }
        }
        return null;
    }

    boolean isEmpty() {
        return regions.isEmpty();
    }
}
