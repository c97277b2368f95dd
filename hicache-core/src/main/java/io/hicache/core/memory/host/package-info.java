/**
 * The host tier (L2): the host page pool, a slab of page slots in a tmpfs file with a Chronicle Map index that
 * lets a restarted process serve its pages again, and its sizing.
 */
package io.hicache.core.memory.host;
