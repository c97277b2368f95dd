package io.hicache.cuda.kit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntimeProvider;
import io.hicache.cuda.CudaOptions;
import io.hicache.testkit.DeviceRuntimeConformanceKit;
import java.util.Optional;

/**
 * The device runtime kit against the CUDA runtime with its copy kernel, on device 0. Where CUDA cannot run, every
 * case is skipped with the reason. The GPU entry point runs it on the GPU machine; a test subclass runs it in the
 * build.
 */
public class CudaKernelRuntimeKit extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        assumeTrue(why.isEmpty(), () -> "no CUDA here: " + why.orElse(""));
        return new CudaDeviceRuntime(CudaOptions.defaults());
    }
}
