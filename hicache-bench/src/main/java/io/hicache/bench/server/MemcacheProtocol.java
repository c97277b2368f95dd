package io.hicache.bench.server;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.ByteProcessor;
import java.nio.charset.StandardCharsets;

/**
 * memcached's text protocol: {@code version}, {@code set key 0 0 bytes}, {@code get key}, {@code delete key} and
 * {@code flush_all}, keys
 * being the page hash in hex (64 characters, under memcached's 250). memcached answers a connection's requests in
 * order, so the decoder numbers answers as they come. Stateless.
 */
final class MemcacheProtocol implements LoadProtocol {
    private static final byte[] CRLF = {'\r', '\n'};

    @Override
    public String name() {
        return "memcached";
    }

    /** {@code version}: memcached needs no handshake, but a round trip shows the connection works. */
    @Override
    public ByteBuf hello(ByteBufAllocator alloc) {
        return ascii(alloc, "version\r\n");
    }

    @Override
    public ByteBuf[] set(ByteBufAllocator alloc, long requestId, PageKey key, ByteBuf body, int crc) {
        ByteBuf head = alloc.directBuffer(112);
        head.writeCharSequence("set ", StandardCharsets.US_ASCII);
        head.writeBytes(key.hexAscii());
        head.writeCharSequence(" 0 0 " + body.readableBytes() + "\r\n", StandardCharsets.US_ASCII);
        ByteBuf tail = alloc.directBuffer(2).writeBytes(CRLF);
        return new ByteBuf[] {head, body, tail};
    }

    @Override
    public ByteBuf get(ByteBufAllocator alloc, long requestId, PageKey key, int pageBytes) {
        ByteBuf out = alloc.directBuffer(80);
        out.writeCharSequence("get ", StandardCharsets.US_ASCII);
        out.writeBytes(key.hexAscii()).writeBytes(CRLF);
        return out;
    }

    @Override
    public ByteBuf flushAll(ByteBufAllocator alloc, long requestId) {
        return ascii(alloc, "flush_all\r\n");
    }

    /**
     * {@code delete key}: memcached's {@code flush_all} only marks items invalid and leaves their memory with the slab
     * class that held them, so the suite deletes a round's pages one by one (untimed) to give their memory back, as
     * Redis's {@code FLUSHALL SYNC} and the daemon's CLEAR_ALL do; else a 64 KiB round would keep memory the 1 MiB
     * pages then lack, and memcached would evict pages still being read.
     */
    ByteBuf delete(ByteBufAllocator alloc, long requestId, PageKey key) {
        ByteBuf out = alloc.directBuffer(80);
        out.writeCharSequence("delete ", StandardCharsets.US_ASCII);
        out.writeBytes(key.hexAscii()).writeBytes(CRLF);
        return out;
    }

    private static ByteBuf ascii(ByteBufAllocator alloc, String text) {
        ByteBuf out = alloc.directBuffer(text.length());
        out.writeCharSequence(text, StandardCharsets.US_ASCII);
        return out;
    }

    /**
     * Answers: {@code STORED}, {@code OK}, {@code DELETED}, {@code VERSION ...} end a request; a get's hit is {@code VALUE key flags
     * bytes}, the bytes and CRLF, then {@code END}; a lone {@code END} is a miss, and {@code ERROR},
     * {@code CLIENT_ERROR ...}, {@code SERVER_ERROR ...}, {@code NOT_STORED} or {@code NOT_FOUND} (a delete of a page
     * memcached had evicted) are failures.
     */
    @Override
    public Decoder decoder() {
        return new Decoder() {
            private long answered;
            private long bodyLeft = -1; // bytes of a value (and its CRLF) still to skip, or -1 outside a value
            private boolean inValue; // a VALUE line was read: its END is still to come

            @Override
            public long next(ByteBuf in) {
                while (true) {
                    if (bodyLeft >= 0) {
                        bodyLeft = Decoder.skip(in, bodyLeft);
                        if (bodyLeft > 0) {
                            return INCOMPLETE;
                        }
                        bodyLeft = -1;
                    }
                    int lf = in.forEachByte(ByteProcessor.FIND_LF);
                    if (lf < 0) {
                        return INCOMPLETE;
                    }
                    String line = in.readCharSequence(lf - in.readerIndex() - 1, StandardCharsets.US_ASCII)
                            .toString();
                    in.skipBytes(2);
                    if (inValue) {
                        if (!line.equals("END")) {
                            throw new IllegalStateException(
                                    "memcached answered a get with more than one value: " + line);
                        }
                        inValue = false;
                        return answered++;
                    }
                    if (line.startsWith("VALUE ")) {
                        String[] parts = line.split(" ");
                        if (parts.length < 4) {
                            throw new IllegalStateException("memcached answered " + line);
                        }
                        bodyLeft = Long.parseLong(parts[3]) + 2;
                        inValue = true;
                        continue;
                    }
                    if (line.equals("STORED")
                            || line.equals("OK")
                            || line.equals("DELETED")
                            || line.startsWith("VERSION ")) {
                        return answered++;
                    }
                    if (line.equals("END")) {
                        throw new IllegalStateException("memcached has no such key (answer " + answered + ")");
                    }
                    throw new IllegalStateException("memcached answered " + line + " (answer " + answered + ")");
                }
            }
        };
    }
}
