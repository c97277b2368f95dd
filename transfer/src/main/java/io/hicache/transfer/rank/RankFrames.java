package io.hicache.transfer.rank;

import io.hicache.core.rank.Reduction;
import java.nio.ByteBuffer;
import org.jspecify.annotations.Nullable;

/**
 * The rank group protocol, on the transfer engine's frame layout: a member says hello as {@code group#rank#size}, then
 * per collective sends CONTRIBUTE (id: the round, region: the reduction, payload: its values as big-endian int32s) to
 * rank 0, which answers every member with RESULT (id: the round, payload: the reduced values), or with ERROR (the
 * reason) once the group has failed. Stateless.
 */
final class RankFrames {
    /** "HCRG". */
    static final int MAGIC = 0x48435247;

    static final byte CONTRIBUTE = 20;
    static final byte RESULT = 21;

    private RankFrames() {}

    /** The hello name of rank {@code rank} of group {@code group} of {@code size} ranks. */
    static String hello(String group, int rank, int size) {
        return group + "#" + rank + "#" + size;
    }

    static byte[] encode(int[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * Integer.BYTES);
        for (int v : values) {
            b.putInt(v);
        }
        return b.array();
    }

    static int[] decode(byte @Nullable [] payload) {
        if (payload == null) {
            return new int[0];
        }
        ByteBuffer b = ByteBuffer.wrap(payload);
        int[] values = new int[payload.length / Integer.BYTES];
        for (int i = 0; i < values.length; i++) {
            values[i] = b.getInt();
        }
        return values;
    }

    static int code(Reduction r) {
        return r.ordinal();
    }

    static Reduction reduction(int code) {
        Reduction[] all = Reduction.values();
        if (code < 0 || code >= all.length) {
            throw new IllegalStateException("unknown reduction " + code);
        }
        return all[code];
    }
}
