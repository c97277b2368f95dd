/**
 * The daemon's wire protocol (docs/protocol.md): length-prefixed binary frames, a version handshake, request ids
 * for pipelining, and the page store operations. Shared by the daemon and its Java client.
 */
package io.hicache.storage.remote.protocol;
