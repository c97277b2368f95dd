/**
 * The cuda-ipc transport's kit ({@link io.hicache.transfer.cuda.kit.CudaIpcTransportKit}) and its peer process,
 * shipped in the module's test jar for the GPU entry point ({@code GpuRun --experiment pd}).
 */
package io.hicache.transfer.cuda.kit;
