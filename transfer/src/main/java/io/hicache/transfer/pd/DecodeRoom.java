package io.hicache.transfer.pd;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * One request on a decode rank: the prefill instance and ranks it takes KV from, its destination, the path chosen for
 * it, and how far the handoff and an abort got. Fields belong to the rank's worker thread, but the state (see
 * {@link RoomState}) and {@link #released}, which completes once.
 */
final class DecodeRoom extends RoomState {
    final String bootstrapUrl;
    /** Prefill ranks that reported SUCCESS. */
    final Set<Integer> succeeded = new HashSet<>();
    /** Prefill ranks that acknowledged an abort. */
    final Set<Integer> acked = new HashSet<>();
    /** Completes true once nothing can be written into the pages any more, false when that stays unknown. */
    final CompletableFuture<Boolean> released = new CompletableFuture<>();
    /** The prefill instance, once looked up. */
    PrefillInstances.Instance prefill;
    /** The prefill ranks this decode rank takes the room from. */
    int[] targets;
    /** Where the pages go, once the engine said ({@link KvReceiver#init}). */
    PdMessage.Destination destination;
    /** How the pages come, chosen once the prefill is known; null before. */
    DeliveryPath path;
    boolean infoSent;
    long infoSentNanos;
    long abortStartedNanos;
    /** The receiver was closed before the room was released: forget it then. */
    boolean forgetWhenReleased;
    /** The staged path's: the room's staging slots for positions [prefix, pages), held until it succeeded or released. */
    int[] stagingSlots;
    /** The staged path's: scatters in flight. */
    int scatters;
    /** The staged path's: the room's destination waits for staging slots. */
    boolean waitingForStaging;

    DecodeRoom(long id, String bootstrapUrl) {
        super(id);
        this.bootstrapUrl = bootstrapUrl;
    }
}
