/**
 * The engine's control plane: the listener peers open a segment at, the control connections an engine opens to its
 * peers, their frames (hello, describe, message, ping), and the heartbeat that decides a peer's liveness. Page bytes
 * never travel here; they go over a transport. Internal to the transfer module: not API.
 */
package io.hicache.transfer.control;
