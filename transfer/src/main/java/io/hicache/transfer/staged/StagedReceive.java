package io.hicache.transfer.staged;

import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.memory.LayerSignals;
import io.hicache.core.util.Checks;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * The receiving half of a staged handoff: as the sender reports layer i written into this side's staging slots, the
 * pool scatters that layer into the request's device pages (one launch), so attention can start on layer 0 while
 * later layers are still on the wire. {@link #layers()} signals each layer usable, in order.
 *
 * <p>Thread-safe. The caller owns the device pages and staging slots until {@link #layers()}'s {@code done()}
 * completes; after a failure, until the sender's side is over and the scatters it started ended, which
 * {@link #scattersInFlight()} tells.
 */
public final class StagedReceive {
    private final KvPool pool;
    private final StagingArea staging;
    private final int[] stagingSlots;
    private final int[] devicePages;
    private final LayerSignals usable;
    private final AtomicIntegerArray arrived;
    private final AtomicInteger inFlight = new AtomicInteger();

    /**
     * Expects the pages' layers in {@code stagingSlots} of {@code staging}, bound for {@code devicePages}.
     *
     * @throws IllegalArgumentException for lists of different lengths
     */
    public StagedReceive(KvPool pool, StagingArea staging, int[] stagingSlots, int[] devicePages) {
        Checks.requireArgument(
                stagingSlots.length == devicePages.length,
                "staging slots and device pages differ in number: %d, %d",
                stagingSlots.length,
                devicePages.length);
        this.pool = pool;
        this.staging = staging;
        this.stagingSlots = stagingSlots.clone();
        this.devicePages = devicePages.clone();
        int layers = pool.format().geometry().layers();
        this.usable = new LayerSignals(layers);
        this.arrived = new AtomicIntegerArray(layers);
    }

    /**
     * Layer {@code layer} is in the staging slots: scatters it. A layer reported twice is scattered once.
     *
     * @throws IndexOutOfBoundsException for a layer the pool's format does not have
     */
    public void layerArrived(int layer) {
        if (!arrived.compareAndSet(layer, 0, 1)) {
            return;
        }
        inFlight.incrementAndGet();
        try {
            pool.loadLayers(staging.slab(), stagingSlots, devicePages, layer, 1)
                    .done()
                    .whenComplete((ok, error) -> {
                        inFlight.decrementAndGet();
                        if (error != null) {
                            usable.fail("scattering layer " + layer, error);
                        } else {
                            usable.landed(layer);
                        }
                    });
        } catch (RuntimeException e) {
            inFlight.decrementAndGet();
            usable.fail("scattering layer " + layer, e);
        }
    }

    /** Scatters started and not yet ended: after a failure, the pages and slots are free to reuse once this is 0. */
    public int scattersInFlight() {
        return inFlight.get();
    }

    /** Fails every layer not yet usable: the sender gave up. */
    public void fail(String why) {
        usable.fail("staged handoff", new IllegalStateException(why));
    }

    /** Each layer usable on the device, in order; {@code done()} when all are. */
    public KvCopy layers() {
        return usable;
    }
}
