package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.WireChecksum;

/**
 * What a connection's accepted HELLO settled (docs/protocol.md §2), handed from {@link HandshakeHandler} to
 * {@link ServerHandler}. Immutable.
 *
 * @param version  the protocol version the connection speaks
 * @param checksum the page checksum on the wire (version 2 may choose CRC-32)
 * @param admin    whether the connection may run admin operations ({@link HandshakeHandler#mayAdminister})
 */
record Session(int version, WireChecksum checksum, boolean admin) {}
