package io.hicache.storage.remote.protocol;

/** A frame that does not follow docs/protocol.md: the peer gets an error (or its connection closed). */
public final class ProtocolException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }
}
