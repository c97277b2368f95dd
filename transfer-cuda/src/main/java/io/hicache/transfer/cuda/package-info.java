/**
 * The {@code cuda-ipc} transport: device memory of one process shared with a peer process on the same host through
 * CUDA IPC, bytes moved GPU to GPU (NVLink between GPUs that have it) with no host copy. Found by
 * {@link java.util.ServiceLoader} through {@link io.hicache.transfer.cuda.CudaIpcTransportProvider}; nothing else uses
 * this package. Needs a CUDA driver and device at run time; without them the provider refuses with the reason.
 */
package io.hicache.transfer.cuda;
