package io.hicache.cuda.kit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntimeProvider;
import io.hicache.cuda.CudaOptions;
import io.hicache.testkit.DeviceRuntimeConformanceKit;
import java.util.Optional;

/**
 * The device runtime kit against the CUDA runtime's copy-engine path (per-page {@code cuMemcpy2DAsync}), the
 * fallback when the kernel cannot load. Skipped where CUDA cannot run.
 */
public class CudaCopyEngineRuntimeKit extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        assumeTrue(why.isEmpty(), () -> "no CUDA here: " + why.orElse(""));
        return new CudaDeviceRuntime(CudaOptions.defaults().withCopyPath(CudaOptions.CopyPath.COPY_ENGINE));
    }
}
