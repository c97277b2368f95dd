package io.hicache.cuda.kit;

/** The CUDA runtime (copy-engine path) runs the device kit where there is a GPU; elsewhere every case skips. */
class CudaCopyEngineRuntimeConformanceTest extends CudaCopyEngineRuntimeKit {}
