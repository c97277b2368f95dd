package io.hicache.cuda.kit;

/** The CUDA runtime (kernel path) runs the device kit where there is a GPU; elsewhere every case skips with why. */
class CudaKernelRuntimeConformanceTest extends CudaKernelRuntimeKit {}
