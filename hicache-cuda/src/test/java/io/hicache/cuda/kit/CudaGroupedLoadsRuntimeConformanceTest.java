package io.hicache.cuda.kit;

/**
 * The CUDA copy kernel in its default shape with grouped load launches, where there is a GPU; elsewhere every case
 * skips.
 */
class CudaGroupedLoadsRuntimeConformanceTest extends CudaGroupedLoadsRuntimeKit {}
