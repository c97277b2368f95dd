/**
 * Framed Netty connections that the engine's control connection and the TCP transport share: the frame header (with
 * the HELLO and ERROR types every protocol on it has), a handler whose reads land page payloads straight in
 * registered memory, the connecting side ({@link io.hicache.transfer.frame.FrameClient}: connect and hello), the
 * listener ({@link io.hicache.transfer.frame.FrameServer}) and the serving side of an accepted connection
 * ({@link io.hicache.transfer.frame.FrameServerHandler}), and event loop groups. Each protocol keeps its own magic
 * and request types. Internal to the transfer module: not API.
 */
package io.hicache.transfer.frame;
