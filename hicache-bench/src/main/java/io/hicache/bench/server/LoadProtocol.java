package io.hicache.bench.server;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * How the load generator speaks to one kind of server: the frames of a set, a get and a flush, and a decoder of
 * answers. Written once per server so that the generator itself (connections, pipelining, timing) is the same code
 * for both sides of the comparison. Implementations are stateless and thread-safe; their decoders are not.
 */
interface LoadProtocol {
    /** The name in reports ({@code hicache}, {@code redis}). */
    String name();

    /** The first request on a new connection (a handshake, or a ping); its answer is decoded like any other. */
    ByteBuf hello(ByteBufAllocator alloc);

    /**
     * Writes a set of page {@code key} to {@code body}'s bytes; {@code body} is written as it is (the caller passes a
     * retained duplicate), so requests carry page bytes without copying them.
     *
     * @param crc the CRC32C of {@code body}, for protocols that check page bodies
     */
    ByteBuf[] set(ByteBufAllocator alloc, long requestId, PageKey key, ByteBuf body, int crc);

    /** A get of page {@code key}, expected to be {@code pageBytes} long. */
    ByteBuf get(ByteBufAllocator alloc, long requestId, PageKey key, int pageBytes);

    /** Drops every page on the server. */
    ByteBuf flushAll(ByteBufAllocator alloc, long requestId);

    /** A decoder for one connection's answers. */
    Decoder decoder();

    /** Reads answers from the bytes a connection receives; skips page bodies without copying them. Not thread-safe. */
    interface Decoder {
        /** Returned by {@link #next} while an answer is incomplete. */
        long INCOMPLETE = -1;

        /**
         * Consumes bytes of the next answer and returns its request id once it is complete, else {@link #INCOMPLETE}
         * (having consumed what it could; unconsumed bytes are offered again with more).
         *
         * @throws IllegalStateException if the server answered with an error or a miss
         */
        long next(ByteBuf in);

        /** Skips up to {@code left} bytes of a body (without reading them) and returns how many are still to come. */
        static long skip(ByteBuf in, long left) {
            int skip = (int) Math.min(left, in.readableBytes());
            in.skipBytes(skip);
            return left - skip;
        }
    }

    /** A page's identity in both worlds: 32 bytes of hash, and the same as 64 hex digits for a string key. */
    record PageKey(byte[] hash, byte[] hexAscii) {
        static PageKey of(long round, long index) {
            byte[] hash = new byte[32];
            for (int i = 0; i < 8; i++) {
                hash[i] = (byte) (round >>> (56 - 8 * i));
                hash[8 + i] = (byte) (index >>> (56 - 8 * i));
            }
            hash[31] = 1; // not the all-zero hash
            byte[] hex = new byte[64];
            for (int i = 0; i < 32; i++) {
                hex[2 * i] = (byte) Character.forDigit((hash[i] >> 4) & 0xF, 16);
                hex[2 * i + 1] = (byte) Character.forDigit(hash[i] & 0xF, 16);
            }
            return new PageKey(hash, hex);
        }
    }
}
