/**
 * The CUDA device runtime (JCuda driver API): KV pools in device memory, pinned host slabs, and the copy kernel
 * shipped as PTX ({@code src/main/cuda}). Chosen by {@code device.runtime = auto} where a GPU is usable.
 */
package io.hicache.cuda;
