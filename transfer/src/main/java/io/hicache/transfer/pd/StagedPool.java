package io.hicache.transfer.pd;

import io.hicache.core.memory.KvPool;
import io.hicache.core.util.Checks;
import io.hicache.transfer.LocalRegion;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.staged.StagingArea;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A staged rank's device pool and staging area (region {@link RankSpec#STAGING_REGION}): what its peers write into
 * and what its pool gathers from or scatters into. Both stay the rank starter's. Immutable.
 */
record StagedPool(KvPool pool, StagingArea staging) {
    private static final System.Logger LOG = System.getLogger(StagedPool.class.getName());

    StagedPool {
        Checks.checkNotNull(pool, "pool");
        Checks.checkNotNull(staging, "staging");
    }

    /** The pool and staging area of a rank with {@code spec}, checked against it. */
    static StagedPool of(KvPool pool, StagingArea staging, RankSpec spec) {
        StagedPool p = new StagedPool(pool, staging);
        Checks.requireArgument(
                spec.staged() && staging.slab().slots() == spec.stagingSlots(),
                "the spec says %d staging slots, the staging area has %d",
                spec.stagingSlots(),
                staging.slab().slots());
        Checks.requireArgument(
                staging.region().name().equals(RankSpec.STAGING_REGION),
                "the staging area must be the engine's region '%s', got '%s'",
                RankSpec.STAGING_REGION,
                staging.region().name());
        Checks.requireArgument(
                pool.pages() == spec.kvPages()
                        && pool.format().geometry().equals(spec.format().geometry())
                        && pool.format().pageSizeTokens() == spec.pageSizeTokens(),
                "the pool (%d pages of %s) is not the spec's (%d pages of %s)",
                pool.pages(),
                pool.format(),
                spec.kvPages(),
                spec.format());
        Checks.requireArgument(
                staging.slab().format().geometry().equals(pool.format().geometry())
                        && staging.slab().format().pageSizeTokens()
                                == pool.format().pageSizeTokens(),
                "the staging area holds %s, the pool %s",
                staging.slab().format(),
                pool.format());
        return p;
    }

    /**
     * Registers the pool's device memory as the engine's device region {@link RankSpec#KV_REGION}, so that a peer
     * linked by a transport that moves device memory writes pages into it directly; null when none of the engine's
     * transports moves device memory, or when one cannot export this memory (logged: the rank then only stages). The
     * caller closes the region before the pool.
     */
    @Nullable
    LocalRegion exportDevice(TransferEngine engine, RankSpec spec) {
        if (!engine.movesDeviceMemory()) {
            return null;
        }
        long base = pool.buffers().layers().getFirst().keyAddress(); // layer 0's K: the start of the pool's layout
        try {
            return engine.registerDevice(RankSpec.KV_REGION, base, spec.kvBytes());
        } catch (RuntimeException e) {
            LOG.log(
                    System.Logger.Level.WARNING,
                    () -> "the KV pool's device memory could not be registered with "
                            + engine.config().name() + "; every handoff stages: " + e.getMessage());
            return null;
        }
    }

    /**
     * The paths a rank of {@code engine} over this pool offers, in order of preference: device to device when the pool
     * was registered as {@code deviceKv} (null: it was not), else through the staging areas.
     */
    List<DeliveryPath> paths(TransferEngine engine, @Nullable LocalRegion deviceKv) {
        StagedPath staged = new StagedPath(this, engine);
        return deviceKv == null ? List.of(staged) : List.of(new DevicePath(deviceKv), staged);
    }

    /**
     * Staging slots for {@code count} pages, or null while fewer are free; ascending, so that slots freed and taken
     * again (the allocator hands them back last freed first, so in reverse) still make long runs: one write per layer
     * and part, not one per page.
     */
    int @Nullable [] takeSlots(int count) {
        int[] slots = count == 0 ? new int[0] : staging.slots().tryAllocate(count);
        if (slots != null) {
            Arrays.sort(slots);
        }
        return slots;
    }
}
