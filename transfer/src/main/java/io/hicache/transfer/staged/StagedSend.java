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
 * <p>At most {@value #WIRE_AHEAD_BYTES} bytes of layers (at least two layers) are on the wire at once: later layers
 * wait, gathered, so that the early ones reach the decode first.
 *
 * <p>Thread-safe. Callbacks run on the device runtime's completion thread and the transport's threads, so they must
 * be short. The caller owns the device pages and both sides' staging slots until {@link #done()} completes, which it
 * does only when no byte of the handoff is moving any more.
 */
public final class StagedSend {
    /**
     * Bytes of gathered layers on the wire at once (at least two layers): enough to keep every connection's window
     * full, few enough that layer i does not share the wire with many later layers, which would delay the first layer
     * the decode can use.
     */
    public static final long WIRE_AHEAD_BYTES = 64L << 20;

    private final int layers;
    private final int layersAhead;
    private final AtomicInteger unresolved;
    private final AtomicReference<String> failure = new AtomicReference<>();
    private final CompletableFuture<Void> done = new CompletableFuture<>();
    private final Wire wire;
    /** Layers gathered, layers handed to the wire (or skipped after a failure), layers on the wire: under the lock. */
    private int gathered;

    private int sent;
    private int onWire;
    private int mostOnWire;

    private StagedSend(int layers, long layerBytes, long wireAheadBytes, Wire wire) {
        this.layers = layers;
        this.layersAhead = (int) Math.max(2, Math.min(layers, wireAheadBytes / layerBytes));
        this.unresolved = new AtomicInteger(layers);
        this.wire = wire;
    }

    /**
     * Starts the handoff of {@code devicePages} of {@code pool}: gathered into {@code stagingSlots} of
     * {@code staging}, written into slots {@code peerSlots} of the peer's staging region {@code peerRegion}, which
     * holds {@code peerSlotCount} slots.
     *
     * @throws IllegalArgumentException for lists of different lengths or slots out of range
     */
    public static StagedSend start(
            KvPool pool,
            int[] devicePages,
            StagingArea staging,
            int[] stagingSlots,
            TransferEngine engine,
            RemoteSegment peer,
            String peerRegion,
            int peerSlotCount,
            int[] peerSlots,
            Deadline deadline,
            IntConsumer layerWritten) {
        return start(
                pool,
                devicePages,
                staging,
                stagingSlots,
                engine,
                peer,
                peerRegion,
                peerSlotCount,
                peerSlots,
                deadline,
                layerWritten,
                WIRE_AHEAD_BYTES);
    }

    /**
     * {@link #start} with another bound on the bytes of gathered layers on the wire at once (at least two layers go
     * whatever the bound): for benchmarks and tests of the bound.
     */
    public static StagedSend start(
            KvPool pool,
            int[] devicePages,
            StagingArea staging,
            int[] stagingSlots,
            TransferEngine engine,
            RemoteSegment peer,
            String peerRegion,
            int peerSlotCount,
            int[] peerSlots,
            Deadline deadline,
            IntConsumer layerWritten,
            long wireAheadBytes) {
        Checks.requireArgument(
                devicePages.length == stagingSlots.length && devicePages.length == peerSlots.length,
                "device pages, staging slots and peer slots differ in number: %d, %d, %d",
                devicePages.length,
                stagingSlots.length,
                peerSlots.length);
        for (int slot : peerSlots) {
            Checks.requireArgument(
                    slot >= 0 && slot < peerSlotCount, "peer slot %d is out of range [0, %d)", slot, peerSlotCount);
        }
        int layers = pool.format().geometry().layers();
        long layerBytes = Math.max(
                1,
                staging.slab().chunkBytes()
                        * pool.format().geometry().attention().parts()
                        * devicePages.length);
        Wire wire = new Wire(
                staging,
                stagingSlots.clone(),
                engine,
                peer,
                peerRegion,
                peerSlotCount,
                peerSlots.clone(),
                deadline,
                layerWritten);
        StagedSend send = new StagedSend(layers, layerBytes, wireAheadBytes, wire);
        KvCopy gather = pool.backupLayers(devicePages, staging.slab(), stagingSlots, 0, layers);
        for (int layer = 0; layer < layers; layer++) {
            int l = layer;
            gather.layerDone(layer).whenComplete((ok, error) -> {
                if (error != null) {
                    send.fail("gathering layer " + l + " failed: " + error.getMessage());
                }
                send.gathered(l); // after a failure pump skips it: every layer resolves in pump, once
            });
        }
        return send;
    }

    /** Where the gathered layers go. */
    private record Wire(
            StagingArea staging,
            int[] stagingSlots,
            TransferEngine engine,
            RemoteSegment peer,
            String peerRegion,
            int peerSlotCount,
            int[] peerSlots,
            Deadline deadline,
            IntConsumer layerWritten) {}

    private void gathered(int layer) {
        synchronized (this) {
            gathered = Math.max(gathered, layer + 1);
        }
        pump();
    }

    /** Hands gathered layers to the wire while fewer than {@link #layersAhead} are on it; skips them after a failure. */
    private void pump() {
        while (true) {
            int layer;
            boolean skip;
            synchronized (this) {
                skip = failure.get() != null;
                if (sent >= gathered || (!skip && onWire >= layersAhead)) {
                    return;
                }
                layer = sent++;
                if (!skip) {
                    onWire++;
                    mostOnWire = Math.max(mostOnWire, onWire);
                }
            }
            if (skip) {
                resolve();
            } else if (wire.deadline().isOver()) {
                fail("the deadline passed before layer " + layer + " was sent");
                offWire();
            } else {
                write(layer);
            }
        }
    }

    private void write(int layer) {
        try {
            List<TransferRequest> writes = writesFor(
                    layer,
                    wire.staging(),
                    wire.stagingSlots(),
                    wire.peerRegion(),
                    wire.peerSlotCount(),
                    wire.peerSlots());
            wire.engine()
                    .submit(wire.peer(), writes, wire.deadline())
                    .whenDone()
                    .whenComplete((batch, error) -> {
                        if (error != null || !batch.allDone()) {
                            fail("writing layer " + layer + " failed: "
                                    + (error != null ? error : batch.firstFailure()));
                        } else {
                            try {
                                wire.layerWritten().accept(layer);
                            } catch (RuntimeException e) {
                                fail("reporting layer " + layer + " failed: " + e);
                            }
                        }
                        offWire();
                    });
        } catch (RuntimeException e) {
            fail("writing layer " + layer + " failed: " + e.getMessage());
            offWire();
        }
    }

    /** A layer left the wire (written, failed or never sent): resolves it and lets the next one on. */
    private void offWire() {
        synchronized (this) {
            onWire--;
        }
        resolve();
        pump();
    }

    /** One write per part and run of slots consecutive on both sides: two per layer for fresh allocations. */
    public static List<TransferRequest> writesFor(
            int layer, StagingArea staging, int[] stagingSlots, String peerRegion, int peerSlotCount, int[] peerSlots) {
        PageFormat format = staging.slab().format();
        long chunk = staging.slab().chunkBytes();
        int parts = format.geometry().attention().parts();
        List<TransferRequest> writes = new ArrayList<>();
        for (int part = 0; part < parts; part++) {
            for (int i = 0; i < stagingSlots.length; ) {
                int run = 1;
                while (i + run < stagingSlots.length
                        && stagingSlots[i + run] == stagingSlots[i] + run
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

    private void fail(String why) {
        failure.compareAndSet(null, why);
    }

    /** One layer is over: written, failed, or skipped. The last one completes {@link #done()}. */
    private void resolve() {
        if (unresolved.decrementAndGet() == 0) {
            String first = failure.get();
            if (first == null) {
                done.complete(null);
            } else {
                done.completeExceptionally(new IllegalStateException("staged handoff failed: " + first));
            }
        }
    }

    /**
     * Stops the handoff: layers not yet on the wire are not sent (those on it finish or fail), and {@link #done()}
     * fails with {@code why} once nothing moves. For an abort, so that the peer hears sooner that nothing more lands.
     */
    public void cancel(String why) {
        fail(why);
        pump();
    }

    /** The most layers that were on the wire at once so far (tests of the bound). */
    synchronized int mostOnWire() {
        return mostOnWire;
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
