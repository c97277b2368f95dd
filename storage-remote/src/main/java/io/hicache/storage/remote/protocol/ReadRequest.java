package io.hicache.storage.remote.protocol;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import java.util.List;

/**
 * The reads (docs/protocol.md §3): LEADING_HITS, PREFIX_HITS, GET, LEASE and RELEASE. They change no page, so a connection's reads
 * may overlap one another and be answered out of order. Immutable records (see {@link Request}).
 */
public sealed interface ReadRequest extends Request {
    /**
     * LEADING_HITS: {@code namespace n:u32 hash[n]}. How many of the pages, from the first, some tier holds.
     *
     * @param namespace the pages' namespace
     * @param keys      the pages, in order, all of {@code namespace}
     */
    record LeadingHits(Namespace namespace, List<StoreKey> keys) implements ReadRequest {
        public LeadingHits {
            KeyTable.check(namespace, keys);
        }

        static LeadingHits read(ByteBuf in, RequestDecoder d) {
            Namespace ns = d.namespace(in);
            return new LeadingHits(ns, KeyTable.read(in, ns, d.count(in, Wire.HASH_BYTES), null, null));
        }

        @Override
        public int op() {
            return Wire.LEADING_HITS;
        }

        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, null, null);
        }
    }

    /**
     * PREFIX_HITS (version 3): {@code namespace n:u32 hash[n]}. Per tier (host slab, L3, either), the longest leading
     * run of the pages held; answered {@code slab:u32 l3:u32 any:u32 l3_state:u8}. A router's question: it changes no
     * page and no page's recency.
     *
     * @param namespace the pages' namespace
     * @param keys      the pages, in order, all of {@code namespace}
     */
    record PrefixHits(Namespace namespace, List<StoreKey> keys) implements ReadRequest {
        public PrefixHits {
            KeyTable.check(namespace, keys);
        }

        static PrefixHits read(ByteBuf in, RequestDecoder d) {
            Namespace ns = d.namespace(in);
            return new PrefixHits(ns, KeyTable.read(in, ns, d.count(in, Wire.HASH_BYTES), null, null));
        }

        @Override
        public int op() {
            return Wire.PREFIX_HITS;
        }

        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, null, null);
        }
    }

    /**
     * GET: {@code namespace n:u32 n × (hash length:u32)}. The pages' bytes, from the host slab or L3.
     *
     * @param namespace the pages' namespace
     * @param keys      the pages, all of {@code namespace}
     * @param lengths   the length the client expects of each page, at least 1
     */
    record Get(Namespace namespace, List<StoreKey> keys, int[] lengths) implements ReadRequest {
        public Get {
            KeyTable.check(namespace, keys, lengths);
        }

        static Get read(ByteBuf in, RequestDecoder d) {
            Namespace ns = d.namespace(in);
            int n = d.count(in, Wire.HASH_BYTES + 4);
            int[] lengths = new int[n];
            return new Get(ns, KeyTable.read(in, ns, n, lengths, null), lengths);
        }

        @Override
        public int op() {
            return Wire.GET;
        }

        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, lengths, null);
        }
    }

    /**
     * LEASE: {@code namespace n:u32 n × (hash length:u32) hold_ms:u32}. Where the pages lie in the slab file, pinned
     * for the lease.
     *
     * @param namespace    the pages' namespace
     * @param keys         the pages, all of {@code namespace}
     * @param lengths      the length the client expects of each page, at least 1
     * @param holdMillis   how long the lease should hold (u32; the daemon caps it at {@code server.max-lease})
     * @param noChecksums  version 2's header flag {@link #NO_CHECKSUMS}: answer no checksums (0 for every page)
     */
    record Lease(Namespace namespace, List<StoreKey> keys, int[] lengths, long holdMillis, boolean noChecksums)
            implements ReadRequest {
        /** The header flag (version 2) of a LEASE that asks for no checksums. */
        public static final int NO_CHECKSUMS = 0x01;

        public Lease {
            KeyTable.check(namespace, keys, lengths);
            Checks.checkInRange(holdMillis, 0, 0xFFFF_FFFFL, "holdMillis");
        }

        /** {@code flags}: the header's, 0 on a version 1 connection (which ignores them). */
        static Lease read(ByteBuf in, RequestDecoder d, int flags) {
            Namespace ns = d.namespace(in);
            int n = d.count(in, Wire.HASH_BYTES + 4);
            int[] lengths = new int[n];
            List<StoreKey> keys = KeyTable.read(in, ns, n, lengths, null);
            return new Lease(ns, keys, lengths, Codec.readUnsignedInt(in), (flags & NO_CHECKSUMS) != 0);
        }

        @Override
        public int op() {
            return Wire.LEASE;
        }

        @Override
        public int flags() {
            return noChecksums ? NO_CHECKSUMS : 0;
        }

        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, lengths, null);
            out.writeInt((int) holdMillis);
        }
    }

    /**
     * RELEASE: {@code lease_id:u64}. Ends a lease, or abandons a reservation, of the connection.
     *
     * @param id the lease's or reservation's id
     */
    record Release(long id) implements ReadRequest {
        static Release read(ByteBuf in) {
            return new Release(Codec.readLong(in));
        }

        @Override
        public int op() {
            return Wire.RELEASE;
        }

        @Override
        public void writeTo(ByteBuf out) {
            out.writeLong(id);
        }
    }
}
