package io.hicache.transfer.staged;

import io.hicache.core.Deadline;
import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.KvPool;
import io.hicache.core.page.PageFormat;
import io.hicache.core.util.Checks;
import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.TransferRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntConsumer;

/**
 * The sending half of a staged handoff, layer by layer and pipelined: the pool gathers the pages' layers into this
 * side's staging area one launch per layer, and as soon as layer i is there its bytes go on the wire to the peer's
 * staging area while layer i+1 is still being gathered (and the peer scatters layer i-1). The peer learns that a
 * layer landed from {@code layerWritten}, called once per layer whose write the peer acknowledged (in any order:
 * layers travel on several connections).
 *
 * <p>Thread-safe. Callbacks run on the device runtime's completion thread and the transport's threads, so they must
 * be short. The caller owns the device pages and both sides' staging slots until {@link #done()} completes, which it
 * does only when no byte of the handoff is moving any more.
 */
public final class StagedSend {
    private final int layers;
    private final AtomicInteger unresolved;
    private final AtomicReference<String> failure = new AtomicReference<>();
    private final CompletableFuture<Void> done = new CompletableFuture<>();

    private StagedSend(int layers) {
        this.layers = layers;
        this.unresolved = new AtomicInteger(layers);
    }

    /**
     * Starts the handoff of {@code devicePages} of {@code pool}: gathered into {@code stagingSlots} of
     * {@code staging}, written into slots {@code peerSlots} of the peer's staging region {@code peerRegion}, which
     * holds {@code peerSlotCount} slots.
     *
     * @throws IllegalArgumentException for lists of different lengths or slots out of range
     */
    public static StagedSend start(KvPool pool, int[] devicePages, StagingArea staging, int[] stagingSlots,
            TransferEngine engine, RemoteSegment peer, String peerRegion, int peerSlotCount, int[] peerSlots,
            Deadline deadline, IntConsumer layerWritten) {
        Checks.requireArgument(devicePages.length == stagingSlots.length && devicePages.length == peerSlots.length,
                "device pages, staging slots and peer slots differ in number: %d, %d, %d", devicePages.length,
                stagingSlots.length, peerSlots.length);
        for (int slot : peerSlots) {
            Checks.requireArgument(slot >= 0 && slot < peerSlotCount, "peer slot %d is out of range [0, %d)", slot,
                    peerSlotCount);
        }
        int layers = pool.format().geometry().layers();
        StagedSend send = new StagedSend(layers);
        KvCopy gather = pool.backupLayers(devicePages, staging.slab(), stagingSlots, 0, layers);
        for (int layer = 0; layer < layers; layer++) {
            int l = layer;
            gather.layerDone(layer).whenComplete((ok, error) -> {
                if (error != null) {
                    send.resolve("gathering layer " + l + " failed: " + error.getMessage());
                } else if (send.failure.get() != null) {
                    send.resolve(null);
                } else if (deadline.isOver()) {
                    send.resolve("the deadline passed before layer " + l + " was sent");
                } else {
                    send.write(l, staging, stagingSlots, engine, peer, peerRegion, peerSlotCount, peerSlots, deadline,
                            layerWritten);
                }
            });
        }
        return send;
    }

    private void write(int layer, StagingArea staging, int[] stagingSlots, TransferEngine engine, RemoteSegment peer,
            String peerRegion, int peerSlotCount, int[] peerSlots, Deadline deadline, IntConsumer layerWritten) {
        List<TransferRequest> writes = writesFor(layer, staging, stagingSlots, peerRegion, peerSlotCount, peerSlots);
        try {
            engine.submit(peer, writes, deadline).whenDone().whenComplete((batch, error) -> {
                if (error != null || !batch.allDone()) {
                    resolve("writing layer " + layer + " failed: " + (error != null ? error : batch.firstFailure()));
                    return;
                }
                try {
                    layerWritten.accept(layer);
                    resolve(null);
                } catch (RuntimeException e) {
                    resolve("reporting layer " + layer + " failed: " + e);
                }
            });
        } catch (RuntimeException e) {
            resolve("writing layer " + layer + " failed: " + e.getMessage());
        }
    }

    /** One write per part and run of slots consecutive on both sides: two per layer for fresh allocations. */
    public static List<TransferRequest> writesFor(int layer, StagingArea staging, int[] stagingSlots, String peerRegion,
            int peerSlotCount, int[] peerSlots) {
        PageFormat format = staging.slab().format();
        long chunk = staging.slab().chunkBytes();
        int parts = format.geometry().attention().parts();
        List<TransferRequest> writes = new ArrayList<>();
        for (int part = 0; part < parts; part++) {
            for (int i = 0; i < stagingSlots.length; ) {
                int run = 1;
                while (i + run < stagingSlots.length && stagingSlots[i + run] == stagingSlots[i] + run
                        && peerSlots[i + run] == peerSlots[i] + run) {
                    run++;
                }
                long from = staging.slab().chunkOffset(stagingSlots[i], layer, part);
                long to = StagingArea.chunkOffset(format, peerSlotCount, peerSlots[i], layer, part);
                writes.add(TransferRequest.write(staging.region().memory().asSlice(from, run * chunk), peerRegion, to));
                i += run;
            }
        }
        return writes;
    }

    private void resolve(String why) {
        if (why != null) {
            failure.compareAndSet(null, why);
        }
        if (unresolved.decrementAndGet() == 0) {
            String first = failure.get();
            if (first == null) {
                done.complete(null);
            } else {
                done.completeExceptionally(new IllegalStateException("staged handoff failed: " + first));
            }
        }
    }

    /** Layers in the handoff. */
    public int layers() {
        return layers;
    }

    /**
     * Completes when every layer was written and reported, or exceptionally with the first failure once no layer is
     * moving any more (layers not yet sent when one failed are not sent).
     */
    public CompletableFuture<Void> done() {
        return done;
    }
}
