package io.hicache.storage.remote.protocol;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The table of pages most requests carry (docs/protocol.md §3): {@code namespace n:u32 n × (hash [length:u32]
 * [crc32c:u32])}, the per-page fields being the request's. Stateless.
 */
final class KeyTable {
    private KeyTable() {}

    /**
     * Reads {@code n} hashes as keys of {@code ns}, each followed by a u32 length if {@code lengths} is given (1 to
     * {@code Integer.MAX_VALUE}: no page is empty) and then a u32 checksum if {@code crcs} is too.
     *
     * @throws ProtocolException for a table cut short or a length out of range
     */
    static List<StoreKey> read(ByteBuf in, Namespace ns, int n, int @Nullable [] lengths, int @Nullable [] crcs) {
        List<StoreKey> keys = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            keys.add(ns.key(Codec.readHash(in)));
            if (lengths != null) {
                long length = Codec.readUnsignedInt(in);
                if (length == 0 || length > Integer.MAX_VALUE) {
                    throw new ProtocolException("page " + i + " has a length of " + length);
                }
                lengths[i] = (int) length;
                if (crcs != null) {
                    crcs[i] = (int) Codec.readUnsignedInt(in);
                }
            }
        }
        return keys;
    }

    /** Writes the table: {@code ns}, the count, and each key's hash with its length and checksum where given. */
    static void write(ByteBuf out, Namespace ns, List<StoreKey> keys, int @Nullable [] lengths, int @Nullable [] crcs) {
        Codec.writeNamespace(out, ns, Wire.VERSION_3);
        out.writeInt(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            Codec.writeHash(out, keys.get(i).hash());
            if (lengths != null) {
                out.writeInt(lengths[i]);
                if (crcs != null) {
                    out.writeInt(crcs[i]);
                }
            }
        }
    }

    /**
     * Checks a record's table: every key is of {@code ns} (one namespace per request), and each per-page array has
     * one entry per key.
     *
     * @throws IllegalArgumentException naming what does not fit
     */
    static void check(Namespace ns, List<StoreKey> keys, int[]... perPage) {
        Checks.checkNotNull(ns, "namespace");
        Checks.checkNotNull(keys, "keys");
        for (StoreKey k : keys) {
            // Decoded keys share the request's namespace object: the identity check is all they cost.
            Checks.requireArgument(
                    k.namespace() == ns || k.namespace().equals(ns),
                    "a request covers one namespace (%s); %s is in another",
                    ns,
                    k);
        }
        for (int[] values : perPage) {
            Checks.requireArgument(values.length == keys.size(), "%d values for %d pages", values.length, keys.size());
        }
    }
}
