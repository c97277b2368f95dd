package io.hicache.cuda.kit;

/** The CUDA copy engine across 16 KiB registration slices, where there is a GPU; elsewhere every case skips. */
class CudaSmallSlicesRuntimeConformanceTest extends CudaSmallSlicesRuntimeKit {}
