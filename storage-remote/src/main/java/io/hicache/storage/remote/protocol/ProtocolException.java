package io.hicache.storage.remote.protocol;

import io.hicache.core.util.Checks;

/**
 * A frame that does not follow docs/protocol.md: the peer gets an ERROR with {@link #code()} (or its connection
 * closed). Most are {@link Wire#E_MALFORMED}; a HELLO of another version is {@link Wire#E_VERSION}, one whose token is
 * too long {@link Wire#E_TOO_LARGE}.
 */
public final class ProtocolException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The ERROR code the peer is answered with. */
    private final short code;

    /** A malformed frame ({@link Wire#E_MALFORMED}). */
    public ProtocolException(String message) {
        this(Wire.E_MALFORMED, message);
    }

    /** A frame refused with ERROR {@code code}, one of the {@code Wire.E_*}. */
    public ProtocolException(short code, String message) {
        super(message);
        this.code = code;
    }

    /** The ERROR code the peer is answered with: {@link Wire#E_MALFORMED} unless made with another. */
    public short code() {
        return code;
    }

    /** Never null: always made with one, which the peer is answered with. */
    @Override
    public String getMessage() {
        return Checks.checkNotNull(super.getMessage(), "the message");
    }
}
