package io.hicache.bench.server;

import io.hicache.core.key.Namespace;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.Wire;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.hicache.storage.remote.protocol.WriteRequest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import java.nio.charset.StandardCharsets;

/**
 * The daemon's protocol ({@code docs/protocol.md}): one-page PUT and GET frames in one namespace, CLEAR_ALL to flush.
 * Answers carry their request ids. Version 1, or (for PUTs flagged {@code UNCHECKED}, §3 PUT) version 2 with CRC-32C.
 * Stateless.
 */
final class HcwpProtocol implements LoadProtocol {
    static final Namespace NAMESPACE = Namespace.of("bench/server", KvDtype.BFLOAT16, PageByteOrder.LAYER_MAJOR, 0, 1);
    /** Length, header, page count and the first page's status: enough to tell an answer's fate. */
    private static final int ANSWER_HEAD = 4 + Wire.HEADER_BYTES + 5;

    private static final long TIMEOUT_MILLIS = 60_000;

    private final boolean unchecked;

    /** Version 1: the daemon checks every PUT's body. */
    HcwpProtocol() {
        this(false);
    }

    /** With {@code unchecked}, version 2, and PUTs flagged {@code UNCHECKED}: stored with the sent checksums. */
    HcwpProtocol(boolean unchecked) {
        this.unchecked = unchecked;
    }

    @Override
    public String name() {
        return "hicache";
    }

    @Override
    public ByteBuf hello(ByteBufAllocator alloc) {
        ByteBuf out = Codec.beginFrame(alloc.directBuffer(64), Wire.HELLO, 0, TIMEOUT_MILLIS);
        out.writeInt(Wire.MAGIC).writeShort(unchecked ? Wire.VERSION_2 : Wire.VERSION);
        Codec.writeString(out, "");
        if (unchecked) {
            out.writeByte(WireChecksum.CRC32C.code());
        }
        return Codec.endFrame(out);
    }

    @Override
    public ByteBuf[] set(ByteBufAllocator alloc, long requestId, PageKey key, ByteBuf body, int crc) {
        ByteBuf head = Codec.beginFrame(alloc.directBuffer(128), Wire.PUT, requestId, TIMEOUT_MILLIS);
        if (unchecked) {
            head.setByte(4 + 1, WriteRequest.Put.UNCHECKED); // the header's flags, after the length and the op
        }
        Codec.writeNamespace(head, NAMESPACE);
        head.writeInt(1).writeBytes(key.hash()).writeInt(body.readableBytes()).writeInt(crc);
        head.setInt(0, head.readableBytes() - 4 + body.readableBytes());
        return new ByteBuf[] {head, body};
    }

    @Override
    public ByteBuf get(ByteBufAllocator alloc, long requestId, PageKey key, int pageBytes) {
        ByteBuf out = Codec.beginFrame(alloc.directBuffer(128), Wire.GET, requestId, TIMEOUT_MILLIS);
        Codec.writeNamespace(out, NAMESPACE);
        out.writeInt(1).writeBytes(key.hash()).writeInt(pageBytes);
        return Codec.endFrame(out);
    }

    @Override
    public ByteBuf flushAll(ByteBufAllocator alloc, long requestId) {
        return Codec.endFrame(Codec.beginFrame(alloc.directBuffer(32), Wire.CLEAR_ALL, requestId, TIMEOUT_MILLIS));
    }

    @Override
    public Decoder decoder() {
        return new Decoder() {
            private long bodyLeft = -1; // bytes of the current answer still to skip, or -1 between answers
            private long id;

            @Override
            public long next(ByteBuf in) {
                if (bodyLeft < 0) {
                    if (in.readableBytes() < 5) {
                        return INCOMPLETE;
                    }
                    int length = in.getInt(in.readerIndex());
                    int op = in.getUnsignedByte(in.readerIndex() + 4);
                    if (op == (Wire.ERROR & 0xFF)) {
                        throw new IllegalStateException(error(in, length));
                    }
                    if (op == (Wire.CLEAR_ALL | Wire.RESPONSE) || op == (Wire.HELLO | Wire.RESPONSE)) {
                        if (in.readableBytes() < 4 + length) {
                            return INCOMPLETE;
                        }
                        id = in.getLong(in.readerIndex() + 8);
                        in.skipBytes(4 + length);
                        return id;
                    }
                    if (in.readableBytes() < ANSWER_HEAD) {
                        return INCOMPLETE;
                    }
                    id = in.getLong(in.readerIndex() + 8);
                    int status = in.getUnsignedByte(in.readerIndex() + 4 + Wire.HEADER_BYTES + 4);
                    if (status != 0) {
                        throw new IllegalStateException(
                                "the daemon answered request " + id + " with page status " + status);
                    }
                    bodyLeft = 4L + length;
                }
                bodyLeft = Decoder.skip(in, bodyLeft);
                if (bodyLeft > 0) {
                    return INCOMPLETE;
                }
                bodyLeft = -1;
                return id;
            }

            private static String error(ByteBuf in, int length) {
                if (in.readableBytes() < 4 + length) {
                    return "the daemon answered with an error";
                }
                int at = in.readerIndex() + 4 + Wire.HEADER_BYTES;
                return "the daemon answered " + Wire.errorName(in.getUnsignedShort(at)) + ": "
                        + in.toString(at + 4, in.getUnsignedShort(at + 2), StandardCharsets.UTF_8);
            }
        };
    }
}
