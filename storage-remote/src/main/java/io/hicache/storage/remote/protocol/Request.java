package io.hicache.storage.remote.protocol;

import io.netty.buffer.ByteBuf;

/**
 * A request's payload as a typed record, one per operation of docs/protocol.md §2 and §3: decoded once from its frame
 * by {@link RequestDecoder} (the daemon's), and written by the record itself ({@link #writeTo}) when the Java client
 * sends it through {@link RequestEncoder}. So the daemon and its Java client share one definition of every payload.
 *
 * <p>The families are what the daemon has a handler for: {@link ReadRequest} (LEADING_HITS, GET, LEASE, RELEASE),
 * {@link WriteRequest} (PUT, DELETE, CLEAR, CLEAR_ALL, RESERVE, COMMIT), {@link AdminRequest} (STATS, HEALTH, FLUSH,
 * STORE), and {@link Hello}, the handshake.
 *
 * <p>Records are immutable, except that the arrays and lists they carry are not copied: whoever makes one does not
 * change them afterwards. A PUT's bodies are a buffer the record does not own ({@link WriteRequest.Put}).
 */
public sealed interface Request permits Hello, ReadRequest, WriteRequest, AdminRequest {
    /** Its operation code, one of {@code Wire}'s requests. */
    int op();

    /** Its header flags (version 2 and later: those of LEASE, COMMIT, PUT and RETAIN, docs/protocol.md §3); 0 else. */
    default int flags() {
        return 0;
    }

    /**
     * Whether it is a write for a connection's order (docs/protocol.md §1: PUT, DELETE, CLEAR, CLEAR_ALL, RESERVE,
     * COMMIT, FLUSH, STORE): it starts only when every earlier request of its connection has finished, and nothing
     * starts while it runs.
     */
    default boolean isWrite() {
        return false;
    }

    /** Writes its payload, everything after the header (a PUT: all but its bodies, which follow). */
    void writeTo(ByteBuf out);
}
