/**
 * The {@code nixl} page store (SGLang's HiCacheNixl) on a Java model of NVIDIA NIXL: the agent and plugin SPI in
 * {@code agent}, the {@code POSIX} and {@code OBJ} plugins in {@code posix} and {@code obj}. See docs/nixl.md for what of
 * NIXL exists here and what does not.
 */
package io.hicache.storage.nixl;
