package io.hicache.transfer.pd;

import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.staged.StagedSend;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * One request on a prefill rank: the decode ranks that want it, how far the engine has sent it, its writes in flight,
 * its aux data and slot, and who waits for an abort's acknowledgement. Fields belong to the rank's worker thread, but
 * {@link #claimed} and the state (see {@link RoomState}).
 */
final class PrefillRoom extends RoomState {
    /** Decode ranks that sent their destination, in the order they did. */
    final List<Recipient> recipients = new ArrayList<>();
    /** Engine addresses of decode ranks that aborted the room and wait for the acknowledgement. */
    final List<String> ackTo = new ArrayList<>();
    /** Destinations needed before the room waits for input (decode TP larger than prefill TP: several). */
    int required = Integer.MAX_VALUE;
    /** Page positions sent so far. */
    int cursor;
    /** Writes not yet over: batches in flight, staged pieces running or waiting for staging slots. */
    int inFlight;
    /** The last chunk's aux data, once it came; null before. */
    byte @Nullable [] lastAux;
    /** The aux writes were submitted (or staging them failed the room). */
    boolean auxSent;
    /** This rank's aux slot holding the aux data while it is written, or -1. */
    int auxSlot = -1;
    /** Until when (nanoTime) the thread may spin for this room's device writes; 0 before its last chunk went out. */
    long spinUntilNanos;
    /** The engine closed its sender: the room is forgotten once no write is in flight. */
    boolean released;
    /** Whether the engine asked for the room's sender; a room only a decode named is dropped after a while. */
    volatile boolean claimed;
    /** Where the room's last chunk is, for {@code -Dhicache.pd.trace}. */
    enum Mark {
        /** The engine sent the chunk (its thread). */
        SENT,
        /** The worker took it. */
        TAKEN,
        /** The KV writes of the chunk were planned (the last recipient's). */
        PLANNED,
        /** The engine accepted the KV writes (the last recipient's). */
        KV_SUBMITTED,
        /** The aux data was staged and its writes submitted. */
        AUX_SUBMITTED,
        /** The last write of the room was done (the transport's thread). */
        WRITES_DONE,
        /** The worker saw that. */
        SEEN
    }

    /** When (nanoTime) the last chunk passed each {@link Mark}. */
    private final long[] marks = new long[Mark.values().length];

    /** The staged path's sends of this room still running ({@link StagedPath}'s). */
    final List<StagedSend> stagedSends = new ArrayList<>();

    PrefillRoom(long id) {
        super(id);
    }

    /** Notes that the last chunk passed {@code mark} at {@code nanos}. */
    void mark(Mark mark, long nanos) {
        marks[mark.ordinal()] = nanos;
    }

    /** When the last chunk passed {@code mark} (0: not yet). */
    long at(Mark mark) {
        return marks[mark.ordinal()];
    }

    /** The paths the room's recipients take, each once. */
    Set<DeliveryPath> paths() {
        Set<DeliveryPath> paths = new LinkedHashSet<>();
        recipients.stream().map(Recipient::path).filter(Objects::nonNull).forEach(paths::add);
        return paths;
    }

    /** Sends {@code message} to every recipient whose segment is alive. */
    void tell(PdMessage message) {
        byte[] bytes = message.encode();
        for (Recipient r : recipients) {
            if (r.segment().alive()) {
                r.segment().send(bytes);
            }
        }
    }

    /** Whether the room has a recipient on {@code segment}. */
    boolean sendsTo(RemoteSegment segment) {
        return recipients.stream().anyMatch(r -> r.segment() == segment);
    }
}
