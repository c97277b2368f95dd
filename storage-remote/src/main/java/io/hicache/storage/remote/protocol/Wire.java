package io.hicache.storage.remote.protocol;

import io.hicache.core.store.PageStatus;

/**
 * The protocol's constants (docs/protocol.md is the specification): frame layout, operation codes, status codes.
 * All integers are big-endian. Stateless.
 *
 * <pre>
 * frame   = u32 length (of everything after it) | header | payload
 * header  = u8 op | u8 flags (0) | u16 reserved (0) | u64 request id | u32 timeout millis (0: the daemon's default, 30 s)
 * </pre>
 */
public final class Wire {
    /** The first four bytes of a HELLO payload: "HCWP". */
    public static final int MAGIC = 0x48435750;
    /** The first protocol version. */
    public static final short VERSION = 1;
    /** Version 2 agrees on a page checksum and adds RESERVE and COMMIT. */
    public static final short VERSION_2 = 2;
    /**
     * The newest version, which the Java client speaks: version 2 with whole namespaces (key format version, weights
     * revision, quantization, page size, tenant; docs/keys.md).
     */
    public static final short VERSION_3 = 3;
    /** Whether the daemon speaks protocol {@code version}: 1, 2 and 3. */
    public static boolean spoken(int version) {
        return version >= VERSION && version <= VERSION_3;
    }

    /** Bytes of the header after the length field. */
    public static final int HEADER_BYTES = 16;
    /** Bytes of a page hash on the wire. */
    public static final int HASH_BYTES = 32;

    // Requests (client to server).
    public static final byte HELLO = 0x01;
    public static final byte LEADING_HITS = 0x10;
    public static final byte GET = 0x11;
    public static final byte PUT = 0x12;
    public static final byte DELETE = 0x13;
    public static final byte CLEAR = 0x14;
    public static final byte CLEAR_ALL = 0x15;
    public static final byte STATS = 0x16;
    public static final byte HEALTH = 0x17;
    public static final byte LEASE = 0x18;
    public static final byte RELEASE = 0x19;
    /** Version 2: room in the slab for pages a same-host client writes itself. */
    public static final byte RESERVE = 0x1A;
    /** Version 2: the pages written into a reservation, checked and stored. */
    public static final byte COMMIT = 0x1B;
    /** Admin: drops the host slab's pages that nothing pins, writing those L3 lacks first; L3 keeps its pages. */
    public static final byte FLUSH = 0x1C;
    /** Admin: shows, detaches or attaches the L3 store; its first payload byte is one of the {@code STORE_*}. */
    public static final byte STORE = 0x1D;
    /** Version 3: per tier (slab, L3), the longest leading run of the pages held; changes no page and no recency. */
    public static final byte PREFIX_HITS = 0x1E;
    /** Version 3: a priority and retention for stored pages of one chain (or a demotion), applied leaf-first. */
    public static final byte RETAIN = 0x1F;
    /** STORE sub-operations. */
    public static final byte STORE_SHOW = 0;

    public static final byte STORE_DETACH = 1;
    public static final byte STORE_ATTACH = 2;

    /** A response has its request's op with the high bit set. */
    public static final int RESPONSE = 0x80;
    /** The answer to a request that failed as a whole: u16 error code, string message. */
    public static final byte ERROR = (byte) 0xFF;

    // Error codes of ERROR frames.
    public static final short E_MALFORMED = 1;
    public static final short E_VERSION = 2;
    public static final short E_AUTH = 3;
    public static final short E_UNKNOWN_OP = 4;
    public static final short E_TOO_LARGE = 5;
    public static final short E_BUSY = 6;
    public static final short E_SHUTTING_DOWN = 7;
    public static final short E_INTERNAL = 8;
    /**
     * A request whose answer carries no per-page status (LEADING_HITS, CLEAR, CLEAR_ALL) did not finish before its
     * deadline; the message says what was done.
     */
    public static final short E_TIMED_OUT = 9;
    /**
     * An admin request the daemon will not carry out as asked (STORE ATTACH while a store is attached, of a store it
     * does not know or one that fails to open); the message says why.
     */
    public static final short E_REFUSED = 10;

    private Wire() {}

    /**
     * The status byte of {@code status}, as docs/protocol.md's table gives it. Spelled out per status, not taken from
     * the enum's order, so that reordering or extending {@link PageStatus} cannot change the protocol.
     */
    public static byte status(PageStatus status) {
        return switch (status) {
            case OK -> 0;
            case EXISTS -> 1;
            case MISS -> 2;
            case CORRUPT -> 3;
            case SIZE_MISMATCH -> 4;
            case REJECTED -> 5;
            case TIMED_OUT -> 6;
            case CANCELLED -> 7;
            case FAILED -> 8;
        };
    }

    /**
     * The status a byte stands for.
     *
     * @throws ProtocolException for a byte the protocol does not define
     */
    public static PageStatus status(byte code) {
        return switch (code) {
            case 0 -> PageStatus.OK;
            case 1 -> PageStatus.EXISTS;
            case 2 -> PageStatus.MISS;
            case 3 -> PageStatus.CORRUPT;
            case 4 -> PageStatus.SIZE_MISMATCH;
            case 5 -> PageStatus.REJECTED;
            case 6 -> PageStatus.TIMED_OUT;
            case 7 -> PageStatus.CANCELLED;
            case 8 -> PageStatus.FAILED;
            default -> throw new ProtocolException("status code " + code + " is not defined");
        };
    }

    /** A short name of an error code, as in metrics labels: {@code malformed}, {@code auth}, ... */
    public static String errorName(int code) {
        return switch (code) {
            case E_MALFORMED -> "malformed";
            case E_VERSION -> "version";
            case E_AUTH -> "auth";
            case E_UNKNOWN_OP -> "unknown_op";
            case E_TOO_LARGE -> "too_large";
            case E_BUSY -> "busy";
            case E_SHUTTING_DOWN -> "shutting_down";
            case E_INTERNAL -> "internal";
            case E_TIMED_OUT -> "timed_out";
            case E_REFUSED -> "refused";
            default -> "error_" + code;
        };
    }

    /** The name of an operation code, for logs and metrics: {@code GET}, {@code PUT}, ... */
    public static String opName(int op) {
        return switch (op & 0x7F) {
            case HELLO -> "HELLO";
            case LEADING_HITS -> "LEADING_HITS";
            case GET -> "GET";
            case PUT -> "PUT";
            case DELETE -> "DELETE";
            case CLEAR -> "CLEAR";
            case CLEAR_ALL -> "CLEAR_ALL";
            case STATS -> "STATS";
            case HEALTH -> "HEALTH";
            case LEASE -> "LEASE";
            case RELEASE -> "RELEASE";
            case RESERVE -> "RESERVE";
            case COMMIT -> "COMMIT";
            case FLUSH -> "FLUSH";
            case STORE -> "STORE";
            case PREFIX_HITS -> "PREFIX_HITS";
            case RETAIN -> "RETAIN";
            default -> (op & 0xFF) == (ERROR & 0xFF) ? "ERROR" : "op 0x" + Integer.toHexString(op & 0xFF);
        };
    }
}
