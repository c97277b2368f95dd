package io.hicache.storage.remote.protocol;

import io.hicache.core.key.Namespace;
import io.hicache.core.util.Checks;
import io.netty.buffer.ByteBuf;
import java.util.function.Function;

/**
 * Decodes a connection's request frames into {@link Request} records, once, on the daemon's event loop: every count
 * is checked against the bytes the frame has before anything is allocated for it, and a request with bytes left over
 * after its payload, or one that ends early, is a {@link ProtocolException} (ERROR MALFORMED; the connection stays).
 * HELLO is not decoded here but by the handshake ({@link Hello#read}), which answers its errors differently.
 *
 * <p>One per connection, made once its HELLO agreed on a version; not thread-safe (the connection's event loop uses
 * it), because the namespace reader it is given may keep state.
 */
public final class RequestDecoder {
    private final int version;
    private final int maxItems;
    private final Function<ByteBuf, Namespace> namespaces;

    /**
     * A decoder for a connection of protocol {@code version}.
     *
     * @param maxFrameBytes the daemon's frame limit, which bounds every count
     * @param namespaces    reads a namespace like {@link Codec#readNamespace} (or a cache of its last one)
     */
    public RequestDecoder(int version, int maxFrameBytes, Function<ByteBuf, Namespace> namespaces) {
        Checks.requireArgument(Wire.spoken(version), "protocol version %d is not " + "defined", version);
        this.version = version;
        this.maxItems = maxFrameBytes / Wire.HASH_BYTES;
        this.namespaces = Checks.checkNotNull(namespaces, "namespaces");
    }

    /** The flags of a request whose header carries {@code headerFlags}: version 1 ignores every flag (§1). */
    public int flags(int headerFlags) {
        return version >= Wire.VERSION_2 ? headerFlags : 0;
    }

    /**
     * Whether this connection's version defines request {@code op} (HELLO aside): RESERVE and COMMIT are version 2's (and 3's), PREFIX_HITS and RETAIN version 3's;
     * any other op, an answer's included, is ERROR UNKNOWN_OP whatever its payload.
     */
    public boolean defines(int op) {
        return switch (op) {
            case Wire.LEADING_HITS,
                    Wire.GET,
                    Wire.PUT,
                    Wire.DELETE,
                    Wire.CLEAR,
                    Wire.CLEAR_ALL,
                    Wire.STATS,
                    Wire.HEALTH,
                    Wire.LEASE,
                    Wire.RELEASE,
                    Wire.FLUSH,
                    Wire.STORE -> true;
            case Wire.RESERVE, Wire.COMMIT -> version >= Wire.VERSION_2;
            case Wire.PREFIX_HITS, Wire.RETAIN -> version >= Wire.VERSION_3;
            default -> false;
        };
    }

    /**
     * Whether request {@code op} is an admin operation (docs/protocol.md §2: FLUSH, STORE DETACH and ATTACH,
     * CLEAR_ALL), told from the op and the first byte of its {@code payload} (not consumed). Asked before the payload
     * is decoded, so that a connection without admin permission is refused an admin operation whatever its payload.
     */
    public static boolean isAdminOperation(int op, ByteBuf payload) {
        return op == Wire.FLUSH
                || op == Wire.CLEAR_ALL
                || op == Wire.STORE
                        && payload.isReadable()
                        && payload.getUnsignedByte(payload.readerIndex()) != Wire.STORE_SHOW;
    }

    /**
     * Decodes the payload of a request whose header is {@code header}, consuming it. A PUT's bodies stay in
     * {@code payload} (the record holds a slice of them), so the record is valid while the frame is held.
     *
     * @throws ProtocolException if the payload is malformed
     * @throws IllegalArgumentException for an op this version does not {@linkplain #defines define}
     */
    public Request decode(FrameHeader header, ByteBuf payload) {
        Checks.requireArgument(
                defines(header.op()), "%s is not a request of protocol version %d", Wire.opName(header.op()), version);
        int flags = flags(header.flags());
        Request request = switch (header.op()) {
            case Wire.LEADING_HITS -> ReadRequest.LeadingHits.read(payload, this);
            case Wire.PREFIX_HITS -> ReadRequest.PrefixHits.read(payload, this);
            case Wire.RETAIN -> WriteRequest.Retain.read(payload, this, flags);
            case Wire.GET -> ReadRequest.Get.read(payload, this);
            case Wire.LEASE -> ReadRequest.Lease.read(payload, this, flags);
            case Wire.RELEASE -> ReadRequest.Release.read(payload);
            case Wire.PUT -> WriteRequest.Put.read(payload, this, flags);
            case Wire.DELETE -> WriteRequest.Delete.read(payload, this);
            case Wire.CLEAR -> WriteRequest.Clear.read(payload, this);
            case Wire.CLEAR_ALL -> new WriteRequest.ClearAll();
            case Wire.RESERVE -> WriteRequest.Reserve.read(payload, this);
            case Wire.COMMIT -> WriteRequest.Commit.read(payload, this, flags);
            case Wire.STATS -> new AdminRequest.Stats();
            case Wire.HEALTH -> new AdminRequest.Health();
            case Wire.FLUSH -> new AdminRequest.Flush();
            case Wire.STORE -> AdminRequest.Store.read(payload);
            default -> throw new IllegalStateException("op " + header.op() + " is defined but not decoded");
        };
        if (payload.isReadable()) {
            throw new ProtocolException(payload.readableBytes() + " bytes after the end of the request");
        }
        return request;
    }

    /**
     * A PUT's table read from the start of its payload, which may hold only part of the bodies (or none): consumes
     * the table.
     *
     * @throws ProtocolException if the bytes given do not hold a well-formed table (malformed, or not all there yet)
     */
    public WriteRequest.Put.Table putTable(ByteBuf payload) {
        return WriteRequest.Put.Table.read(payload, this);
    }

    /** Reads a namespace, through the connection's reader. */
    Namespace namespace(ByteBuf in) {
        return namespaces.apply(in);
    }

    /** Reads a count of items of at least {@code minItemBytes} each, checked against the frame (see {@link Codec#readCount}). */
    int count(ByteBuf in, int minItemBytes) {
        return Codec.readCount(in, minItemBytes, maxItems);
    }
}
