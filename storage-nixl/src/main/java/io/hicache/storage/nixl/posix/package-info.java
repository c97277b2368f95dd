/** The {@code POSIX} NIXL plugin: files with positional I/O on a pool of I/O threads, optionally {@code O_DIRECT}. */
package io.hicache.storage.nixl.posix;
