package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.WireChecksum;

/**
 * What a connection's accepted HELLO settled (docs/protocol.md §2), handed from {@link HandshakeHandler} to
 * {@link ServerHandler}. Immutable.
 *
 * @param version  the protocol version the connection speaks
 * @param checksum the page checksum on the wire (version 2 may choose CRC-32)
 * @param admin    whether the connection may run admin operations ({@link HandshakeHandler#mayAdminister})
 * @param access   the namespaces it reaches (a tenant's own, or all; {@link Tenants})
 * @param sameHost whether it may take leases and reservations on the slab file: a loopback peer that is no tenant
 */
record Session(int version, WireChecksum checksum, boolean admin, Tenants.Access access, boolean sameHost) {}
