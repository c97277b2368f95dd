package io.hicache.transfer.pd;

import io.hicache.transfer.RemoteSegment;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * How one room's pages get from a prefill rank's pool into a decode rank's: a strategy chosen once per room and used by
 * both ranks, so that neither branches on the path. The decode rank chooses it (the first path it offers that reaches
 * every prefill rank of the room) and names it in its {@link PdMessage.Info}; the prefill rank checks that it can serve
 * it and moves each chunk of the room through it; the decode rank lets it reserve what the room needs before the INFO
 * goes out and settle what lands after the wire.
 *
 * <ul>
 *   <li>{@link DirectPath}: one-sided writes from the prefill's pool region into the decode's (host-visible pools).
 *   <li>{@link DevicePath}: the same writes between pools registered as device memory, over a transport that moves
 *       device memory (cuda-ipc).
 *   <li>{@link StagedPath}: through pinned staging areas on both sides, layer by layer (device pools nothing reaches).
 * </ul>
 *
 * <p>Each rank makes one instance of each path it offers, over its own memory, and keeps it until it closes (the memory
 * stays the rank starter's). Methods of one side are called by that side's rank only, on its worker thread; what an
 * instance keeps belongs to that thread.
 */
sealed interface DeliveryPath permits DirectPath, DevicePath, StagedPath {
    /** The paths by name, as INFO carries them. */
    enum Kind {
        DIRECT("direct", true, "direct writes into its pool", "this rank's pool is not registered as host memory"),
        STAGED("staged", false, "staged writes", "this rank has no staging area"),
        DEVICE("device", true, "device-to-device writes", "this rank's pool is not registered as device memory");

        private final String wireName;
        private final boolean splitsHeads;
        private final String description;
        private final String unoffered;

        Kind(String wireName, boolean splitsHeads, String description, String unoffered) {
            this.wireName = wireName;
            this.splitsHeads = splitsHeads;
            this.description = description;
            this.unoffered = unoffered;
        }

        /** The name in INFO. */
        String wireName() {
            return wireName;
        }

        /**
         * Whether the path moves any head slice of a row (so prefill and decode may split heads differently): only the
         * staged path moves whole rows ({@link RankSpec#incompatibility}'s {@code deviceToDevice}).
         */
        boolean splitsHeads() {
            return splitsHeads;
        }

        /** Why a prefill rank refuses a room that asks for this path when it does not offer it. */
        String refusal(String decodeAddress) {
            return "the decode at " + decodeAddress + " asked for " + description + ", but " + unoffered;
        }

        /** The kind INFO names {@code name}. */
        static Kind named(String name) {
            for (Kind k : values()) {
                if (k.wireName.equals(name)) {
                    return k;
                }
            }
            throw new IllegalArgumentException("no delivery path is named '" + name + "'");
        }
    }

    /** Which path this is. */
    Kind kind();

    // ---- the decode rank's side

    /**
     * Whether this path can carry a room from prefill ranks {@code prefills}, which {@code segments} link this engine to
     * (one each, in order).
     */
    default boolean reaches(List<RankSpec> prefills, List<RemoteSegment> segments) {
        return true;
    }

    /**
     * Takes what {@code room} needs before its destination goes out; false while it cannot (the room waits: the path
     * sends its INFO itself once it can), or when it failed the room.
     */
    default boolean reserve(DecodeRank rank, DecodeRoom room) {
        return true;
    }

    /** What {@link #reserve} took that INFO names: the decode's staging slots of the room; else empty. */
    default int[] reserved(DecodeRoom room) {
        return new int[0];
    }

    /** What a room that {@link #reserve} held back waits for ("no 4 staging slots came free"), or null. */
    default @Nullable String awaited(DecodeRoom room) {
        return null;
    }

    /** A prefill rank reports a layer in this rank's memory; paths whose writes land in place have nothing to do. */
    default void layerLanded(DecodeRank rank, DecodeRoom room, PdMessage.Layer layer) {}

    /** Whether nothing of the room still lands after the wire (the staged path's scatters). */
    default boolean settled(DecodeRoom room) {
        return true;
    }

    /** Gives back what {@link #reserve} took, once nothing can be written into it any more. */
    default void giveBack(DecodeRank rank, DecodeRoom room) {}

    /** Whether the room still holds what {@link #reserve} took. */
    default boolean holds(DecodeRoom room) {
        return false;
    }

    // ---- the prefill rank's side

    /** Why this prefill rank cannot serve {@code recipient} over this path, or null when it can. */
    default @Nullable String refusal(Recipient recipient) {
        return null;
    }

    /**
     * Moves pages {@code src} of this rank's pool to page positions {@code [position, position + src.length)} of
     * {@code recipient}'s destination, every write counted in the room's writes in flight until it is over.
     */
    void send(PrefillRank rank, PrefillRoom room, Recipient recipient, int[] src, int position);

    /** The room failed: what this path has not started for it never starts, what runs stops as soon as it can. */
    default void stop(PrefillRank rank, PrefillRoom room) {}
}
