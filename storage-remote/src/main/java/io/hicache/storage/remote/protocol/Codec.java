package io.hicache.storage.remote.protocol;

import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.PageByteOrder;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Reading and writing the protocol's fields on Netty buffers: strings, namespaces, page hashes. Every read checks
 * that the bytes it needs are there, and that counts and lengths are within what the frame can hold, before it
 * allocates anything: a malformed frame is a {@link ProtocolException}, never a huge allocation. Stateless.
 */
public final class Codec {
    /** Longest string field: namespace texts are at most 512 characters, 4 bytes each in UTF-8. */
    public static final int MAX_STRING_BYTES = 4 * Namespace.MAX_TEXT_LENGTH;

    private Codec() {}

    /**
     * Starts a frame in {@code out}: a length placeholder (filled in by {@link #endFrame}) and the header with
     * flags and reserved bits zero.
     */
    public static ByteBuf beginFrame(ByteBuf out, int op, long requestId, long timeoutMillis) {
        out.writeInt(0);
        out.writeByte(op);
        out.writeByte(0);
        out.writeShort(0);
        out.writeLong(requestId);
        out.writeInt((int) Math.min(timeoutMillis, 0xFFFF_FFFFL));
        return out;
    }

    /** Fills in the length of a frame begun at index 0 of {@code out} with {@link #beginFrame}. */
    public static ByteBuf endFrame(ByteBuf out) {
        return out.setInt(0, out.readableBytes() - 4);
    }

    /** Writes a string: u16 length, then its UTF-8 bytes. */
    public static void writeString(ByteBuf out, String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        out.writeShort(bytes.length);
        out.writeBytes(bytes);
    }

    /**
     * Reads a string: u16 length, then that many bytes of UTF-8.
     *
     * @throws ProtocolException for a string over {@link #MAX_STRING_BYTES}, one cut short, or bytes that are not valid
     *     UTF-8 (refused, never repaired)
     */
    public static String readString(ByteBuf in) {
        int length = readUnsignedShort(in);
        if (length > MAX_STRING_BYTES) {
            throw new ProtocolException("a string of " + length + " bytes is over the limit of " + MAX_STRING_BYTES);
        }
        need(in, length, "string");
        String s;
        try {
            // Strict: a lossy decoder maps different invalid byte strings to the same text, which would merge two
            // tenants' namespaces. Valid UTF-8 and strings correspond one to one, so comparing text compares bytes.
            s = StandardCharsets.UTF_8
                    .newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(in.nioBuffer(in.readerIndex(), length))
                    .toString();
        } catch (CharacterCodingException e) {
            throw new ProtocolException("a string of " + length + " bytes is not valid UTF-8");
        }
        in.skipBytes(length);
        return s;
    }

    /**
     * A namespace as versions 1 and 2 write it: model id, dtype name, byte order, TP rank and size, extra key. These
     * versions cannot say a weights revision, quantization, page size or tenant: a namespace with any of them is
     * refused.
     *
     * @throws IllegalArgumentException for a namespace these versions cannot say
     */
    public static void writeNamespace(ByteBuf out, Namespace ns) {
        Checks.requireArgument(
                ns.formatVersion() == Namespace.FORMAT_VERSION
                        && ns.weightsRevision().isEmpty()
                        && ns.quantization().isEmpty()
                        && ns.pageTokens() == 0
                        && ns.tenant().isEmpty(),
                "protocol versions 1 and 2 cannot carry %s: speak version 3",
                ns);
        writeCommonFields(out, ns);
    }

    /** A namespace as a connection of protocol {@code version} writes it. */
    public static void writeNamespace(ByteBuf out, Namespace ns, int version) {
        if (version < Wire.VERSION_3) {
            writeNamespace(out, ns);
            return;
        }
        writeCommonFields(out, ns);
        out.writeShort(ns.formatVersion());
        writeString(out, ns.weightsRevision());
        writeString(out, ns.quantization());
        out.writeInt(ns.pageTokens());
        writeString(out, ns.tenant());
    }

    private static void writeCommonFields(ByteBuf out, Namespace ns) {
        writeString(out, ns.modelId());
        writeString(out, ns.kvDtype().configName());
        out.writeByte(ns.pageByteOrder() == PageByteOrder.LAYER_MAJOR ? 0 : 1);
        out.writeShort(ns.tpRank());
        out.writeShort(ns.tpSize());
        writeString(out, ns.extraKey());
    }

    /**
     * A namespace as versions 1 and 2 write it: of the current key format, with no weights revision, quantization, page
     * size or tenant.
     */
    public static Namespace readNamespace(ByteBuf in) {
        return readNamespace(in, Wire.VERSION_2);
    }

    /**
     * A namespace as a connection of protocol {@code version} writes it; version 3 adds {@code format:u16
     * revision:string quant:string page_tokens:u32 tenant:string} after the extra key.
     *
     * @throws ProtocolException when the bytes are cut short or name no namespace ("bad namespace: ...")
     */
    public static Namespace readNamespace(ByteBuf in, int version) {
        String model = readString(in);
        String dtype = readString(in);
        need(in, 5, "namespace");
        int order = in.readUnsignedByte();
        int rank = in.readUnsignedShort();
        int size = in.readUnsignedShort();
        String extra = readString(in);
        if (order > 1) {
            throw new ProtocolException("page byte order " + order + " is not defined");
        }
        Namespace.Builder b;
        try {
            b = Namespace.builder(model)
                    .kvDtype(KvDtype.parse(dtype))
                    .pageByteOrder(order == 0 ? PageByteOrder.LAYER_MAJOR : PageByteOrder.TOKEN_MAJOR)
                    .tensorParallel(rank, size)
                    .extraKey(extra);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException("bad namespace: " + e.getMessage());
        }
        if (version >= Wire.VERSION_3) {
            need(in, 2, "namespace");
            int format = in.readUnsignedShort();
            String revision = readString(in);
            String quantization = readString(in);
            need(in, 4, "namespace");
            long pageTokens = in.readUnsignedInt();
            String tenant = readString(in);
            if (pageTokens > Namespace.MAX_PAGE_TOKENS) {
                throw new ProtocolException("bad namespace: pages of " + pageTokens + " tokens (at most "
                        + Namespace.MAX_PAGE_TOKENS + ", 0: not stated)");
            }
            b.formatVersion(format)
                    .weightsRevision(revision)
                    .quantization(quantization)
                    .pageTokens((int) pageTokens)
                    .tenant(tenant);
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new ProtocolException("bad namespace: " + e.getMessage());
        }
    }

    public static void writeHash(ByteBuf out, PageHash hash) {
        out.writeBytes(hash.toBytes());
    }

    public static PageHash readHash(ByteBuf in) {
        need(in, Wire.HASH_BYTES, "page hash");
        byte[] b = new byte[Wire.HASH_BYTES];
        in.readBytes(b);
        return PageHash.fromBytes(b, 0);
    }

    /**
     * A count of items of at least {@code minItemBytes} each, checked against the bytes left: a count the frame
     * cannot hold is malformed.
     */
    public static int readCount(ByteBuf in, int minItemBytes, int maxItems) {
        need(in, 4, "count");
        long count = in.readUnsignedInt();
        if (count > maxItems || count * minItemBytes > in.readableBytes()) {
            throw new ProtocolException("a count of " + count + " does not fit the frame (" + in.readableBytes()
                    + " bytes left, limit " + maxItems + ")");
        }
        return (int) count;
    }

    public static int readUnsignedByte(ByteBuf in) {
        need(in, 1, "u8");
        return in.readUnsignedByte();
    }

    public static int readUnsignedShort(ByteBuf in) {
        need(in, 2, "u16");
        return in.readUnsignedShort();
    }

    public static long readUnsignedInt(ByteBuf in) {
        need(in, 4, "u32");
        return in.readUnsignedInt();
    }

    public static long readLong(ByteBuf in) {
        need(in, 8, "u64");
        return in.readLong();
    }

    public static void need(ByteBuf in, int bytes, String what) {
        if (in.readableBytes() < bytes) {
            throw new ProtocolException(
                    "the frame ends inside a " + what + " (" + in.readableBytes() + " of " + bytes + " bytes)");
        }
    }
}
