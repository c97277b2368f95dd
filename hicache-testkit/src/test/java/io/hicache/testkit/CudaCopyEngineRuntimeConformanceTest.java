package io.hicache.testkit;

/** The CUDA runtime (copy-engine path) runs the device kit where there is a GPU; elsewhere every case skips. */
class CudaCopyEngineRuntimeConformanceTest extends CudaCopyEngineRuntimeKit {
}
