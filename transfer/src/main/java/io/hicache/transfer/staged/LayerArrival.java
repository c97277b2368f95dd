package io.hicache.transfer.staged;

import java.nio.ByteBuffer;
import java.util.Optional;

/**
 * The message a staged handoff's sender sends its peer for every layer written into the peer's staging slots (over
 * {@link io.hicache.transfer.RemoteSegment#send}): which handoff, which layer. Immutable.
 *
 * @param handoff the id both sides know the handoff by (a PD room)
 * @param layer   the layer now in the peer's staging slots
 */
public record LayerArrival(long handoff, int layer) {
    private static final int MAGIC = 0x4C415952; // "LAYR"

    /** The 16 bytes on the wire. */
    public byte[] encode() {
        return ByteBuffer.allocate(16)
                .putInt(MAGIC)
                .putLong(handoff)
                .putInt(layer)
                .array();
    }

    /** The arrival {@code payload} encodes, or empty when it is some other message. */
    public static Optional<LayerArrival> decode(byte[] payload) {
        if (payload.length != 16) {
            return Optional.empty();
        }
        ByteBuffer b = ByteBuffer.wrap(payload);
        if (b.getInt() != MAGIC) {
            return Optional.empty();
        }
        return Optional.of(new LayerArrival(b.getLong(), b.getInt()));
    }
}
