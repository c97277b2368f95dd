package io.hicache.transfer.pd;

import io.hicache.core.util.Checks;
import io.hicache.transfer.RemoteSegment;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

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
    PrefillInstances.@Nullable Instance prefill;
    /** The prefill ranks this decode rank takes the room from. */
    int @Nullable [] targets;
    /** Where the pages go, once the engine said ({@link KvReceiver#init}). */
    PdMessage.@Nullable Destination destination;
    /** How the pages come, chosen once the prefill is known; null before. */
    @Nullable
    DeliveryPath path;

    boolean infoSent;
    long infoSentNanos;
    long abortStartedNanos;
    /** The receiver was closed before the room was released: forget it then. */
    boolean forgetWhenReleased;
    /** The staged path's: the room's staging slots for positions [prefix, pages), held until it succeeded or released. */
    int @Nullable [] stagingSlots;
    /** The staged path's: scatters in flight. */
    int scatters;
    /** The staged path's: the room's destination waits for staging slots. */
    boolean waitingForStaging;

    DecodeRoom(long id, String bootstrapUrl) {
        super(id);
        this.bootstrapUrl = bootstrapUrl;
    }

    /** {@link #targets}, of a room that has its path: resolving set them first. */
    int[] resolvedTargets() {
        return Checks.checkNotNull(targets, "the prefill ranks of a resolved room");
    }

    /** {@link #path}, of a room whose INFO went out: INFO names it. */
    DeliveryPath chosenPath() {
        return Checks.checkNotNull(path, "the path of a room whose INFO went out");
    }

    /** The segment to {@code rank}, one of the targets of a room that has its path: resolving opened them all first. */
    RemoteSegment segment(int rank) {
        PrefillInstances.Instance p = Checks.checkNotNull(prefill, "the prefill of a resolved room");
        return Checks.checkNotNull(p.opened(rank), "the segment to a resolved room's prefill rank");
    }
}
