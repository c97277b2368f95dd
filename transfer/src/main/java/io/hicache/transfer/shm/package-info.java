/** The shared-memory transport for peers on one host. */
package io.hicache.transfer.shm;
