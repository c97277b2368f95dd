package io.hicache.cuda.kit;

/** The CUDA copy kernel shaped unlike the default, where there is a GPU; elsewhere every case skips. */
class CudaAlternateTuningRuntimeConformanceTest extends CudaAlternateTuningRuntimeKit {}
