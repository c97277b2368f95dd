package io.hicache.transfer.pd;

import io.hicache.core.util.Checks;
import io.hicache.transfer.TransferEngine;
import io.hicache.transfer.staged.StagedSend;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Device pools that no transport reaches (CUDA pools without a device transport between them): pages pass through the
 * pinned staging areas of both ranks, layer by layer and pipelined.
 *
 * <ul>
 *   <li>Decode: before its INFO goes out a room takes staging slots for the pages it wants, first come first served;
 *       when too few are free it waits for rooms that give slots back (the bootstrap timeout bounds the wait; a room
 *       larger than the whole area fails at once). Each layer a prefill reports ({@link PdMessage.Layer}) is scattered
 *       from the slots into the room's pages; the room settles once every scatter ended, and gives its slots back once
 *       it succeeded or nothing can be written into them any more.
 *   <li>Prefill: each chunk goes in pieces of at most the staging area, which wait in order for staging slots; a piece
 *       is a {@link StagedSend} (gather a layer into the slots, write it into the decode's slots, report it). A failed
 *       room's waiting pieces are dropped and its running sends stop putting layers on the wire.
 * </ul>
 *
 * <p>Staged ranks need the same TP size, MLA aside: whole rows move ({@link Kind#splitsHeads()}). Worker thread only, as
 * every path (see {@link DeliveryPath}).
 *
 * @see io.hicache.transfer.staged
 */
final class StagedPath implements DeliveryPath {
    private final StagedPool staged;
    /** The rank's engine: a prefill's staged sends write through it. */
    private final TransferEngine engine;
    /** Prefill: pieces waiting for staging slots, oldest first. */
    private final ArrayDeque<Piece> waiting = new ArrayDeque<>();

    /** One piece of a chunk: pages {@code src} of the pool for positions {@code [position, position + src.length)}. */
    private record Piece(PrefillRoom room, Recipient recipient, int[] src, int position) {}

    StagedPath(StagedPool staged, TransferEngine engine) {
        this.staged = staged;
        this.engine = engine;
    }

    @Override
    public Kind kind() {
        return Kind.STAGED;
    }

    // ---- decode

    @Override
    public boolean reserve(DecodeRank rank, DecodeRoom room) {
        // asked once the destination came
        int wanted =
                Checks.checkNotNull(room.destination, "a room's destination").wanted();
        int capacity = staged.staging().slab().slots();
        if (wanted > capacity) {
            rank.fail(room, "the room needs " + wanted + " staging slots, the staging area has " + capacity);
            return false;
        }
        boolean olderWaits = rank.rooms().stream()
                .anyMatch(r ->
                        r != room && r.waitingForStaging && !r.state.isFinal() && r.createdNanos < room.createdNanos);
        room.stagingSlots = olderWaits ? null : staged.takeSlots(wanted); // first come, first served
        room.waitingForStaging = room.stagingSlots == null; // giveBack tries again; the bootstrap timeout bounds it
        return !room.waitingForStaging;
    }

    @Override
    public int[] reserved(DecodeRoom room) {
        return room.stagingSlots == null ? new int[0] : room.stagingSlots;
    }

    @Override
    public @Nullable String awaited(DecodeRoom room) {
        // a room waits for staging only once its destination came
        return room.waitingForStaging
                ? "no "
                        + Checks.checkNotNull(room.destination, "a waiting room's destination")
                                .wanted() + " staging slots came free"
                : null;
    }

    /** Scatters layer {@code m.layer()} of pages {@code [m.from(), m.from() + m.count())} from the room's slots. */
    @Override
    public void layerLanded(DecodeRank rank, DecodeRoom room, PdMessage.Layer m) {
        if (room.stagingSlots == null || room.state == KvPoll.FAILED) {
            return; // a failed room's pages may be reused once released: nothing more is written into them
        }
        // slots are reserved once the destination came
        PdMessage.Destination destination = Checks.checkNotNull(room.destination, "a room's destination");
        int prefix = destination.prefixPages();
        int positions = destination.positions();
        int layer = m.layer();
        if (m.from() < prefix
                || m.count() < 1
                || m.from() > positions - m.count()
                || layer < 0
                || layer >= rank.spec().model().layers()) {
            rank.fail(
                    room,
                    "a prefill rank reported layer " + layer + " of pages [" + m.from() + ", " + (m.from() + m.count())
                            + "), outside the " + (positions - prefix) + " pages it was asked for");
            return;
        }
        int[] slots = Arrays.copyOfRange(room.stagingSlots, m.from() - prefix, m.from() - prefix + m.count());
        int[] targets = destination.pages(m.from(), m.count());
        room.scatters++;
        try {
            staged.pool()
                    .loadLayers(staged.staging().slab(), slots, targets, layer, 1)
                    .done()
                    .whenComplete((ok, e) -> rank.post(() -> scattered(rank, room, layer, e)));
        } catch (RuntimeException e) {
            scattered(rank, room, layer, e);
        }
    }

    private void scattered(DecodeRank rank, DecodeRoom room, int layer, @Nullable Throwable failure) {
        room.scatters--;
        if (failure != null) {
            rank.fail(room, "scattering layer " + layer + " failed: " + failure.getMessage());
        }
        rank.maybeSucceed(room);
        rank.maybeRelease(room);
    }

    @Override
    public boolean settled(DecodeRoom room) {
        return room.scatters == 0;
    }

    /** Gives the room's slots back, then sends the destination of rooms that waited for slots, oldest first. */
    @Override
    public void giveBack(DecodeRank rank, DecodeRoom room) {
        if (room.stagingSlots == null) {
            return;
        }
        staged.staging().slots().free(room.stagingSlots);
        room.stagingSlots = null;
        List<DecodeRoom> waitingRooms = rank.rooms().stream()
                .filter(r -> r.waitingForStaging && !r.state.isFinal())
                .sorted(Comparator.comparingLong(r -> r.createdNanos))
                .toList();
        for (DecodeRoom r : waitingRooms) {
            rank.maybeSendInfo(r);
            if (r.waitingForStaging) {
                return;
            }
        }
    }

    @Override
    public boolean holds(DecodeRoom room) {
        return room.stagingSlots != null;
    }

    // ---- prefill

    @Override
    public @Nullable String refusal(Recipient recipient) {
        int named = recipient.info().stagingSlots().length;
        int wanted = recipient.destination().wanted();
        if (recipient.dummy() || named == wanted) {
            return null;
        }
        return "the decode named " + named + " staging slots for " + wanted + " pages";
    }

    /**
     * Sends the pages through both staging areas; the decode hears of each layer (LAYER) as it lands in its staging
     * slots and scatters it. A chunk larger than the staging area goes in pieces; pieces wait, in the order they came,
     * while the staging area is full.
     */
    @Override
    public void send(PrefillRank rank, PrefillRoom room, Recipient recipient, int[] src, int position) {
        int most = staged.staging().slab().slots();
        for (int at = 0; at < src.length; at += most) {
            int n = Math.min(most, src.length - at);
            room.inFlight++; // a waiting piece keeps the room from finishing, as a write in flight does
            waiting.add(new Piece(room, recipient, Arrays.copyOfRange(src, at, at + n), position + at));
        }
        startWaiting(rank);
    }

    private void startWaiting(PrefillRank rank) {
        while (!waiting.isEmpty()) {
            Piece piece = waiting.peek();
            if (piece.room().state == KvPoll.FAILED) {
                waiting.poll();
                rank.writeOver(piece.room(), null);
                continue;
            }
            int[] local = staged.takeSlots(piece.src().length);
            if (local == null) {
                return; // a staged send in flight gives slots back, and starts the rest then
            }
            waiting.poll();
            start(rank, piece, local);
        }
    }

    private void start(PrefillRank rank, Piece piece, int[] local) {
        PrefillRoom room = piece.room();
        Recipient to = piece.recipient();
        int at = piece.position() - to.destination().prefixPages();
        int[] peer = Arrays.copyOfRange(to.info().stagingSlots(), at, at + piece.src().length);
        int tpRank = rank.spec().tpRank();
        StagedSend send;
        try {
            send = StagedSend.start(
                    staged.pool(),
                    piece.src(),
                    staged.staging(),
                    local,
                    engine,
                    to.segment(),
                    RankSpec.STAGING_REGION,
                    to.spec().stagingSlots(),
                    peer,
                    rank.chunkDeadline(),
                    layer -> to.segment()
                            .send(new PdMessage.Layer(room.id, tpRank, piece.position(), piece.src().length, layer)
                                    .encode()));
        } catch (RuntimeException e) {
            staged.staging().slots().free(local);
            rank.writeOver(room, "staging a chunk failed: " + e);
            return;
        }
        room.stagedSends.add(send);
        send.done()
                .whenComplete((ok, e) -> rank.post(() -> {
                    room.stagedSends.remove(send);
                    staged.staging().slots().free(local);
                    rank.writeOver(
                            room,
                            e == null
                                    ? null
                                    : "staged transfer to decode " + to.spec().engineAddress() + " failed: "
                                            + e.getMessage());
                    startWaiting(rank);
                }));
    }

    /** Waiting pieces of the room are dropped; its running sends put no more layers on the wire (an ack comes sooner). */
    @Override
    public void stop(PrefillRank rank, PrefillRoom room) {
        for (StagedSend send : room.stagedSends) {
            send.cancel(Checks.checkNotNull(room.reason, "a failed room's reason")); // stopped once it failed
        }
        int dropped = 0;
        for (Iterator<Piece> it = waiting.iterator(); it.hasNext(); ) {
            if (it.next().room() == room) {
                it.remove();
                dropped++;
            }
        }
        if (dropped > 0) {
            rank.dropped(room, dropped);
        }
    }
}
