package io.hicache.transfer.pd;

import org.jspecify.annotations.Nullable;

/**
 * The prefill side of one request: once {@link #poll()} is {@link KvPoll#WAITING_FOR_INPUT} the engine computes the
 * request and calls {@link #send} for each chunk of pages in order, the last with the aux data. Thread-safe;
 * {@link #close()} lets the rank forget the room once it is final.
 */
public final class KvSender extends KvHandoff {
    private final PrefillRank rank;
    private final PrefillRoom room;

    KvSender(PrefillRank rank, PrefillRoom room) {
        super(room);
        this.rank = rank;
        this.room = room;
    }

    /**
     * Sends the next chunk: {@code pages} are this rank's pool pages holding the request's next page positions.
     * Pages the decode already holds are skipped. With {@code last}, {@code aux} (at most one aux slot) is written
     * after every page has landed, then the decode is told SUCCESS.
     *
     * @throws IllegalStateException when the destination has not arrived yet
     */
    public void send(int[] pages, boolean last, byte @Nullable [] aux) {
        if (room.state == KvPoll.BOOTSTRAPPING) {
            throw new IllegalStateException("room " + room.id + " has no destination yet (still bootstrapping)");
        }
        rank.send(room, pages.clone(), last, aux == null ? null : aux.clone());
    }

    /** Lets the rank forget the room (once final; a room still sending is kept until it is). */
    @Override
    public void close() {
        rank.release(room);
    }
}
