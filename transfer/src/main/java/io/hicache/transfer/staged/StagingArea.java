package io.hicache.transfer.staged;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.HostRegistration;
import io.hicache.core.memory.HostSlab;
import io.hicache.core.memory.PageAllocator;
import io.hicache.core.page.HostLayout;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferEngine;

/**
 * Pinned host memory that KV pages pass through between a device pool that no transport can reach (a CUDA pool) and
 * the transfer engine: {@code slots} pages of the pool's geometry in the {@code layer_first} layout, so that one
 * layer of any set of slots is one run per part (K, V) when the slots are consecutive. It is at once a shared region
 * of the engine (a file under the shared-memory folder, so the {@code shm} transport reaches it as well as {@code tcp})
 * and host memory registered with the device runtime (what the copy kernel reads and writes).
 *
 * <p>Thread-safe. The opener closes it: closing unregisters the region from the device runtime and from the engine,
 * then frees it; copies and transfers through it must be over by then.
 */
public final class StagingArea implements AutoCloseable {
    private final LocalRegion region;
    private final HostRegistration pinned;
    private final HostSlab slab;
    private final PageAllocator slots;

    private StagingArea(LocalRegion region, HostRegistration pinned, HostSlab slab) {
        this.region = region;
        this.pinned = pinned;
        this.slab = slab;
        this.slots = new PageAllocator("staging " + region.name(), slab.slots());
    }

    /**
     * Creates {@code slots} staging pages of {@code poolFormat}'s geometry and page size as the engine's shared region
     * {@code name}, registered with {@code runtime}.
     *
     * @throws IllegalArgumentException for a bad name or slot count
     */
    public static StagingArea open(
            TransferEngine engine, String name, DeviceRuntime runtime, PageFormat poolFormat, int slots) {
        Checks.checkPositive(slots, "slots");
        PageFormat format = layerFirst(poolFormat);
        LocalRegion region = engine.registerShared(name, HostSlab.bytesFor(format, slots));
        try {
            HostRegistration pinned = runtime.registerHost(region.memory());
            return new StagingArea(region, pinned, new HostSlab(region.memory(), format, slots));
        } catch (RuntimeException e) {
            region.close();
            throw e;
        }
    }

    /** The staging format for pages of {@code poolFormat}: same geometry and page size, {@code layer_first}. */
    public static PageFormat layerFirst(PageFormat poolFormat) {
        return new PageFormat(poolFormat.geometry(), poolFormat.pageSizeTokens(), HostLayout.LAYER_FIRST);
    }

    /**
     * Where layer {@code layer}, part {@code part} of slot {@code slot} lies in a staging region of {@code slots}
     * pages of {@code format} (this process's or a peer's, which may have another slot count).
     */
    public static long chunkOffset(PageFormat format, int slots, int slot, int layer, int part) {
        long chunk = format.rowBytes() * format.pageSizeTokens();
        return (((long) part * format.geometry().layers() + layer) * slots + slot) * chunk;
    }

    /** The engine's region: its name is what peers address, its memory is what transports move. */
    public LocalRegion region() {
        return region;
    }

    /** The staging pages as a host slab, for the pool's layer copies. */
    public HostSlab slab() {
        return slab;
    }

    /** The allocator of the staging slots: a handoff holds its slots until its last layer has left or landed. */
    public PageAllocator slots() {
        return slots;
    }

    @Override
    public void close() {
        try {
            pinned.close();
        } finally {
            region.close();
        }
    }

    @Override
    public String toString() {
        return "StagingArea[" + region.name() + ", " + slab.slots() + " slots of "
                + slab.format().pageBytes() + " bytes]";
    }
}
