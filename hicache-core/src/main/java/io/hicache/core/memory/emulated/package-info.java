/**
 * The emulated device runtime: KV pools in off-heap host memory and copies on a pool of copy threads, so the
 * whole cache runs and is tested without a GPU.
 */
package io.hicache.core.memory.emulated;
