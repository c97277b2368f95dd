package io.hicache.transfer.cuda.kit;

/** The cuda-ipc kit in the build: every case skips where CUDA cannot run (CI); on a GPU they run. */
class CudaIpcTransportConformanceTest extends CudaIpcTransportKit {}
