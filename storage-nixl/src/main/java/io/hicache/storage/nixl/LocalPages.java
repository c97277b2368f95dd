package io.hicache.storage.nixl;

import io.hicache.core.store.PageBatch;
import io.hicache.storage.nixl.spi.MemoryRegion;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The local side of one batch: a descriptor per page (inside registered host memory, or in a registration made for
 * this batch) and per trailer (a block of the batch's own). Used by one call; {@link #close()} deregisters what the
 * batch registered.
 */
final class LocalPages implements AutoCloseable {
    private final NixlAgent agent;
    private final XferDesc[] pages;
    private final XferDesc[] trailers;
    private final MemorySegment trailerBlock;
    private final Registration own;

    private LocalPages(
            NixlAgent agent, XferDesc[] pages, XferDesc[] trailers, MemorySegment trailerBlock, Registration own) {
        this.agent = agent;
        this.pages = pages;
        this.trailers = trailers;
        this.trailerBlock = trailerBlock;
        this.own = own;
    }

    /** Registers in one call every page outside host memory, and the trailer block. */
    static LocalPages register(NixlAgent agent, HostRegions host, PageBatch batch, MemorySegment trailerBlock) {
        int n = batch.size();
        XferDesc[] pages = new XferDesc[n];
        List<MemoryRegion> toRegister = new ArrayList<>(n + 1);
        List<Integer> registeredPages = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            pages[i] = host.isEmpty() ? null : host.descOf(batch.page(i));
            if (pages[i] == null) {
                toRegister.add(new MemoryRegion.Dram(batch.page(i)));
                registeredPages.add(i);
            }
        }
        toRegister.add(new MemoryRegion.Dram(trailerBlock));
        Registration own = agent.register(toRegister);
        for (int j = 0; j < registeredPages.size(); j++) {
            pages[registeredPages.get(j)] = own.region(j).whole();
        }
        var block = own.region(toRegister.size() - 1);
        XferDesc[] trailers = new XferDesc[n];
        for (int i = 0; i < n; i++) {
            trailers[i] = block.slice((long) i * PageTrailer.BYTES, PageTrailer.BYTES);
        }
        return new LocalPages(agent, pages, trailers, trailerBlock, own);
    }

    XferDesc pageDesc(int i) {
        return pages[i];
    }

    XferDesc trailerDesc(int i) {
        return trailers[i];
    }

    MemorySegment trailer(int i) {
        return trailerBlock.asSlice((long) i * PageTrailer.BYTES, PageTrailer.BYTES);
    }

    @Override
    public void close() {
        agent.deregister(own);
    }
}
