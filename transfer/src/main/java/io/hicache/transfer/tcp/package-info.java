/** The TCP transport and the engine's listener, on Netty. Internal to the transfer module. */
package io.hicache.transfer.tcp;
