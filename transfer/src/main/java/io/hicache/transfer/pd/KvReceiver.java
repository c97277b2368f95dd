package io.hicache.transfer.pd;

import java.util.concurrent.CompletableFuture;

/**
 * The decode side of one request: {@link #init} sends the destination once the decode has pre-allocated pages and
 * an aux slot; {@link #poll()} follows the handoff. Thread-safe; {@link #close()} lets the rank forget the room.
 */
public final class KvReceiver extends KvHandoff {
    private final DecodeRank rank;
    private final DecodeRoom room;

    KvReceiver(DecodeRank rank, DecodeRoom room) {
        super(room);
        this.rank = rank;
        this.room = room;
    }

    /**
     * Sends the destination: {@code pages[i]} of this rank's pool receives page position {@code i} of the request;
     * {@code auxSlot} receives the aux data; the first {@code prefixPages} positions are already here and are not
     * sent.
     *
     * @throws IllegalArgumentException for an aux slot or page outside this rank's, or a prefix longer than the pages
     */
    public void init(int[] pages, int auxSlot, int prefixPages) {
        if (auxSlot < 0 || auxSlot >= rank.spec().auxSlots()) {
            throw new IllegalArgumentException(
                    "aux slot " + auxSlot + " is not in [0, " + rank.spec().auxSlots() + ")");
        }
        PdMessage.Destination destination = new PdMessage.Destination(pages, auxSlot, prefixPages);
        for (int p : pages) {
            if (p < 0 || p >= rank.spec().kvPages()) {
                throw new IllegalArgumentException("page " + p + " is not in this rank's pool of "
                        + rank.spec().kvPages());
            }
        }
        rank.init(room, destination);
    }

    /**
     * Aborts in two phases: the room fails at once, prefill is asked to stop, and the future completes with
     * {@code true} once no write for the room can still land (every prefill rank acknowledged after draining, or is
     * dead with no connection left), so the pages may be reused; with {@code false} if no acknowledgement came
     * within the abort timeout, in which case the pages must stay quarantined.
     */
    public CompletableFuture<Boolean> abort() {
        return rank.abort(room);
    }

    /** Lets the rank forget the room (after an abort, once it was released). */
    @Override
    public void close() {
        rank.forget(room);
    }
}
