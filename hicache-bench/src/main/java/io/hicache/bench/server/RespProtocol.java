package io.hicache.bench.server;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.ByteProcessor;
import java.nio.charset.StandardCharsets;

/**
 * Redis's RESP2: {@code PING}, {@code SET key value}, {@code GET key} and {@code FLUSHALL SYNC}, keys being the page hash in hex.
 * Redis answers in request order, so the decoder numbers answers as they come. Stateless.
 */
final class RespProtocol implements LoadProtocol {
    private static final byte[] CRLF = {'\r', '\n'};

    @Override
    public String name() {
        return "redis";
    }

    /** {@code PING}: Redis needs no handshake, but a round trip shows the connection works. */
    @Override
    public ByteBuf hello(ByteBufAllocator alloc) {
        ByteBuf out = alloc.directBuffer(16);
        out.writeCharSequence("*1\r\n$4\r\nPING\r\n", StandardCharsets.US_ASCII);
        return out;
    }

    @Override
    public ByteBuf[] set(ByteBufAllocator alloc, long requestId, PageKey key, ByteBuf body, int crc) {
        ByteBuf head = alloc.directBuffer(128);
        head.writeCharSequence("*3\r\n$3\r\nSET\r\n", StandardCharsets.US_ASCII);
        bulk(head, key.hexAscii());
        head.writeCharSequence("$" + body.readableBytes() + "\r\n", StandardCharsets.US_ASCII);
        ByteBuf tail = alloc.directBuffer(2).writeBytes(CRLF);
        return new ByteBuf[] {head, body, tail};
    }

    @Override
    public ByteBuf get(ByteBufAllocator alloc, long requestId, PageKey key, int pageBytes) {
        ByteBuf out = alloc.directBuffer(96);
        out.writeCharSequence("*2\r\n$3\r\nGET\r\n", StandardCharsets.US_ASCII);
        bulk(out, key.hexAscii());
        return out;
    }

    @Override
    public ByteBuf flushAll(ByteBufAllocator alloc, long requestId) {
        ByteBuf out = alloc.directBuffer(32);
        out.writeCharSequence("*2\r\n$8\r\nFLUSHALL\r\n$4\r\nSYNC\r\n", StandardCharsets.US_ASCII);
        return out;
    }

    private static void bulk(ByteBuf out, byte[] bytes) {
        out.writeCharSequence("$" + bytes.length + "\r\n", StandardCharsets.US_ASCII);
        out.writeBytes(bytes).writeBytes(CRLF);
    }

    @Override
    public Decoder decoder() {
        return new Decoder() {
            private long answered;
            private long bodyLeft = -1; // bytes of a bulk string (and its CRLF) still to skip, or -1 between answers

            @Override
            public long next(ByteBuf in) {
                if (bodyLeft < 0) {
                    int lf = in.forEachByte(ByteProcessor.FIND_LF);
                    if (lf < 0) {
                        return INCOMPLETE;
                    }
                    byte type = in.readByte();
                    String line = in.readCharSequence(lf - in.readerIndex() - 1, StandardCharsets.US_ASCII)
                            .toString();
                    in.skipBytes(2);
                    switch (type) {
                        case '+', ':' -> {
                            return answered++;
                        }
                        case '$' -> {
                            long length = Long.parseLong(line);
                            if (length < 0) {
                                throw new IllegalStateException("redis has no such key (answer " + answered + ")");
                            }
                            bodyLeft = length + 2;
                        }
                        default -> throw new IllegalStateException("redis answered " + (char) type + line);
                    }
                }
                bodyLeft = Decoder.skip(in, bodyLeft);
                if (bodyLeft > 0) {
                    return INCOMPLETE;
                }
                bodyLeft = -1;
                return answered++;
            }
        };
    }
}
