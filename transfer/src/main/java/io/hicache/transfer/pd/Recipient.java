package io.hicache.transfer.pd;

import io.hicache.transfer.RemoteSegment;
import org.jspecify.annotations.Nullable;

/**
 * One decode rank that wants a room's KV from a prefill rank: what its INFO said, this engine's segment to it, and the
 * path its pages take (null when the prefill rank does not offer the path the INFO named: the room then fails at once).
 * Immutable.
 */
record Recipient(
        PdMessage.Info info,
        RemoteSegment segment,
        @Nullable DeliveryPath path) {
    /** The decode rank. */
    RankSpec spec() {
        return info.decode();
    }

    /** Where it wants the pages. */
    PdMessage.Destination destination() {
        return info.destination();
    }

    /** Whether this prefill rank sends it nothing (MLA: another rank sends the whole latent). */
    boolean dummy() {
        return info.dummy();
    }

    /**
     * Why prefill rank {@code prefill} cannot serve it, or null: the two ranks' specs do not fit the path (the
     * handshake's refusal), the rank does not offer the path, or the path cannot reach it.
     */
    @Nullable
    String refusal(RankSpec prefill) {
        String mismatch = spec().incompatibility(prefill, info.path().splitsHeads());
        if (mismatch != null) {
            return "refused at handshake: " + mismatch;
        }
        return path == null ? info.path().refusal(spec().engineAddress()) : path.refusal(this);
    }
}
