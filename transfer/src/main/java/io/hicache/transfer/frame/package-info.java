/**
 * Framed Netty connections that the engine's control connection and the TCP transport share: the frame header, a
 * handler whose reads land page payloads straight in registered memory, and event loop groups. Internal to the
 * transfer module: not API.
 */
package io.hicache.transfer.frame;
