package io.hicache.storage.remote.protocol;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.StoreKey;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import java.util.List;

/**
 * The writes (docs/protocol.md §3): PUT, DELETE, CLEAR, CLEAR_ALL, version 2's RESERVE and COMMIT, and version 3's
 * RETAIN. A connection's
 * writes take effect in the order it sent them (§1). Immutable records (see {@link Request}).
 */
public sealed interface WriteRequest extends Request {
    @Override
    default boolean isWrite() {
        return true;
    }

    /**
     * PUT: {@code namespace n:u32 n × (hash length:u32 crc32c:u32) body[...]}, the bodies in order after the table.
     *
     * <p>{@code bodies} is not the record's: decoded, it is a slice of the request's frame (no copy), valid while the
     * frame is held; made by a client, {@link RequestEncoder#frame} takes it over and the frame releases it.
     *
     * @param namespace the pages' namespace
     * @param keys      the pages, all of {@code namespace}
     * @param lengths   each page's length, at least 1
     * @param crcs      each page's checksum (the connection's, docs/protocol.md §2)
     * @param bodies    the pages' bytes, one after another: exactly the lengths' sum
     * @param unchecked the header flag {@link #UNCHECKED} (version 2): on a CRC-32C connection the daemon stores each
     *                  page with the client's checksum without checking its body; readers check it
     */
    record Put(Namespace namespace, List<StoreKey> keys, int[] lengths, int[] crcs, ByteBuf bodies, boolean unchecked)
            implements WriteRequest {
        /** The header flag of a PUT whose bodies the daemon stores without checking them (docs/protocol.md §3 PUT). */
        public static final int UNCHECKED = 0x01;

        public Put {
            KeyTable.check(namespace, keys, lengths, crcs);
            Checks.checkNotNull(bodies, "bodies");
            Checks.requireArgument(
                    sum(lengths) == bodies.readableBytes(),
                    "the page lengths add up to %d bytes, the " + "bodies have %d",
                    sum(lengths),
                    bodies.readableBytes());
        }

        /** A PUT whose bodies the daemon checks before it stores them. */
        public Put(Namespace namespace, List<StoreKey> keys, int[] lengths, int[] crcs, ByteBuf bodies) {
            this(namespace, keys, lengths, crcs, bodies, false);
        }

        static Put read(ByteBuf in, RequestDecoder d, int flags) {
            Table t = Table.read(in, d);
            long total = t.bodyBytes();
            if (total != in.readableBytes()) {
                throw new ProtocolException(
                        "the page lengths add up to " + total + " bytes, the frame has " + in.readableBytes());
            }
            return new Put(
                    t.namespace(),
                    t.keys(),
                    t.lengths(),
                    t.crcs(),
                    in.readSlice((int) total),
                    (flags & UNCHECKED) != 0);
        }

        /**
         * A PUT's table without its bodies, for a reader that puts each body in place as it arrives (the daemon lands
         * them in the slab): read from the payload's start, before the bodies are there.
         *
         * @param tableBytes the table's bytes in the payload: the bodies start there
         */
        public record Table(Namespace namespace, List<StoreKey> keys, int[] lengths, int[] crcs, int tableBytes) {
            static Table read(ByteBuf in, RequestDecoder d) {
                int start = in.readerIndex();
                Namespace ns = d.namespace(in);
                int n = d.count(in, Wire.HASH_BYTES + 8);
                int[] lengths = new int[n];
                int[] crcs = new int[n];
                List<StoreKey> keys = KeyTable.read(in, ns, n, lengths, crcs);
                return new Table(ns, keys, lengths, crcs, in.readerIndex() - start);
            }

            /** The bodies' bytes: the lengths' sum. */
            public long bodyBytes() {
                return sum(lengths);
            }
        }

        private static long sum(int[] lengths) {
            long total = 0;
            for (int length : lengths) {
                total += length;
            }
            return total;
        }

        @Override
        public int op() {
            return Wire.PUT;
        }

        @Override
        public int flags() {
            return unchecked ? UNCHECKED : 0;
        }

        /** Writes the table; the bodies follow it in the frame ({@link RequestEncoder#frame} adds them). */
        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, lengths, crcs);
        }
    }

    /**
     * RETAIN (version 3): {@code namespace priority:u8 retention_ms:u32 n:u32 hash[n]}. Gives the stored pages of one
     * chain, named from its first page (prefix keys included) to its last, a retention priority (0-99) that holds for
     * {@code retention_ms} after each use and then decays to 0; with the header flag {@link #DEMOTE}, makes them the
     * first pages to go instead (priority 0, no retention). Answered {@code n:u32 status[n]}: OK, or MISS for a page
     * not in the host slab. A write, so that a PUT pipelined before it has stored its pages when it runs.
     *
     * @param namespace       the pages' namespace
     * @param keys            the chain's pages in order, all of {@code namespace}
     * @param priority        0 to {@link #MAX_PRIORITY}
     * @param retentionMillis how long the priority holds after each use (u32)
     * @param demote          the flag {@link #DEMOTE}: the pages go first (then priority and retention are 0)
     */
    record Retain(Namespace namespace, List<StoreKey> keys, int priority, long retentionMillis, boolean demote)
            implements WriteRequest {
        /** The highest priority: SGLang's priority classes are 0-99. */
        public static final int MAX_PRIORITY = 99;
        /** The header flag of a RETAIN that demotes its pages. */
        public static final int DEMOTE = 0x01;

        public Retain {
            KeyTable.check(namespace, keys);
            Checks.checkInRange(priority, 0, MAX_PRIORITY, "priority");
            Checks.checkInRange(retentionMillis, 0, 0xFFFF_FFFFL, "retentionMillis");
            Checks.requireArgument(
                    !demote || (priority == 0 && retentionMillis == 0),
                    "a demotion carries priority 0 and no retention");
        }

        static Retain read(ByteBuf in, RequestDecoder d, int flags) {
            Namespace ns = d.namespace(in);
            Codec.need(in, 5, "retain priority and retention");
            int priority = in.readUnsignedByte();
            long retention = Codec.readUnsignedInt(in);
            boolean demote = (flags & DEMOTE) != 0;
            if (priority > MAX_PRIORITY) {
                throw new ProtocolException("priority " + priority + " is over " + MAX_PRIORITY);
            }
            if (demote && (priority != 0 || retention != 0)) {
                throw new ProtocolException("a demotion carries priority 0 and no retention");
            }
            List<StoreKey> keys = KeyTable.read(in, ns, d.count(in, Wire.HASH_BYTES), null, null);
            return new Retain(ns, keys, priority, retention, demote);
        }

        @Override
        public int op() {
            return Wire.RETAIN;
        }

        @Override
        public int flags() {
            return demote ? DEMOTE : 0;
        }

        @Override
        public void writeTo(ByteBuf out) {
            Codec.writeNamespace(out, namespace, Wire.VERSION_3);
            out.writeByte(priority);
            out.writeInt((int) retentionMillis);
            out.writeInt(keys.size());
            for (StoreKey key : keys) {
                Codec.writeHash(out, key.hash());
            }
        }
    }

    /**
     * DELETE: {@code namespace n:u32 hash[n]}. Removes the pages from every tier.
     *
     * @param namespace the pages' namespace
     * @param keys      the pages, all of {@code namespace}
     */
    record Delete(Namespace namespace, List<StoreKey> keys) implements WriteRequest {
        public Delete {
            KeyTable.check(namespace, keys);
        }

        static Delete read(ByteBuf in, RequestDecoder d) {
            Namespace ns = d.namespace(in);
            return new Delete(ns, KeyTable.read(in, ns, d.count(in, Wire.HASH_BYTES), null, null));
        }

        @Override
        public int op() {
            return Wire.DELETE;
        }

        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, null, null);
        }
    }

    /**
     * CLEAR: {@code namespace}. Removes every page of the namespace from both tiers.
     *
     * @param namespace the namespace cleared
     */
    record Clear(Namespace namespace) implements WriteRequest {
        public Clear {
            Checks.checkNotNull(namespace, "namespace");
        }

        static Clear read(ByteBuf in, RequestDecoder d) {
            return new Clear(d.namespace(in));
        }

        @Override
        public int op() {
            return Wire.CLEAR;
        }

        @Override
        public void writeTo(ByteBuf out) {
            Codec.writeNamespace(out, namespace, Wire.VERSION_3);
        }
    }

    /** CLEAR_ALL: no payload. Removes every page of every namespace from both tiers; an admin operation (§2). */
    record ClearAll() implements WriteRequest {
        @Override
        public int op() {
            return Wire.CLEAR_ALL;
        }

        @Override
        public void writeTo(ByteBuf out) {}
    }

    /**
     * RESERVE (version 2): {@code namespace n:u32 n × (hash length:u32) hold_ms:u32}. Room in the slab for pages a
     * same-host client writes itself.
     *
     * @param namespace  the pages' namespace
     * @param keys       the pages, all of {@code namespace}
     * @param lengths    each page's length, at least 1
     * @param holdMillis how long the room is held uncommitted (u32; the daemon caps it at {@code server.max-lease})
     */
    record Reserve(Namespace namespace, List<StoreKey> keys, int[] lengths, long holdMillis) implements WriteRequest {
        public Reserve {
            KeyTable.check(namespace, keys, lengths);
            Checks.checkInRange(holdMillis, 0, 0xFFFF_FFFFL, "holdMillis");
        }

        static Reserve read(ByteBuf in, RequestDecoder d) {
            Namespace ns = d.namespace(in);
            int n = d.count(in, Wire.HASH_BYTES + 4);
            int[] lengths = new int[n];
            List<StoreKey> keys = KeyTable.read(in, ns, n, lengths, null);
            return new Reserve(ns, keys, lengths, Codec.readUnsignedInt(in));
        }

        @Override
        public int op() {
            return Wire.RESERVE;
        }

        @Override
        public void writeTo(ByteBuf out) {
            KeyTable.write(out, namespace, keys, lengths, null);
            out.writeInt((int) holdMillis);
        }
    }

    /**
     * COMMIT (version 2): {@code reservation_id:u64 n:u32 crc32c[n]:u32}. Stores what the client wrote into its
     * reservation, page by page in RESERVE's order.
     *
     * @param reservationId the reservation RESERVE answered
     * @param crcs          the checksum of each page written (the connection's; ignored for a page not reserved,
     *                      and for every page with {@code noChecksums})
     * @param noChecksums   the header flag {@link #NO_CHECKSUMS}: the client sends no checksums (0s); the daemon
     *                      checksums the bytes in the slab itself, which crossed no wire
     */
    record Commit(long reservationId, int[] crcs, boolean noChecksums) implements WriteRequest {
        /** The header flag of a COMMIT whose client sends no checksums. */
        public static final int NO_CHECKSUMS = 0x01;

        public Commit {
            Checks.checkNotNull(crcs, "crcs");
        }

        /** A COMMIT with the checksums of the pages written. */
        public Commit(long reservationId, int[] crcs) {
            this(reservationId, crcs, false);
        }

        static Commit read(ByteBuf in, RequestDecoder d, int flags) {
            long reservation = Codec.readLong(in);
            int n = d.count(in, 4);
            int[] crcs = new int[n];
            for (int i = 0; i < n; i++) {
                crcs[i] = (int) Codec.readUnsignedInt(in);
            }
            return new Commit(reservation, crcs, (flags & NO_CHECKSUMS) != 0);
        }

        @Override
        public int op() {
            return Wire.COMMIT;
        }

        @Override
        public int flags() {
            return noChecksums ? NO_CHECKSUMS : 0;
        }

        @Override
        public void writeTo(ByteBuf out) {
            out.writeLong(reservationId);
            out.writeInt(crcs.length);
            for (int crc : crcs) {
                out.writeInt(crc);
            }
        }
    }
}
