/**
 * The daemon's wire protocol (docs/protocol.md): length-prefixed binary frames ({@link
 * io.hicache.storage.remote.protocol.FrameHeader}), a version handshake ({@link io.hicache.storage.remote.protocol.Hello}),
 * request ids for pipelining, and the page store operations as typed requests ({@link
 * io.hicache.storage.remote.protocol.Request}), decoded once by the daemon ({@link
 * io.hicache.storage.remote.protocol.RequestDecoder}) and encoded by the Java client ({@link
 * io.hicache.storage.remote.protocol.RequestEncoder}). Shared by the daemon and its Java client.
 */
package io.hicache.storage.remote.protocol;
