package io.hicache.cuda.kit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntimeProvider;
import io.hicache.cuda.CudaOptions;
import io.hicache.testkit.DeviceRuntimeConformanceKit;
import java.util.Optional;

/**
 * The device runtime kit against the CUDA copy-engine path with host memory pinned in 16 KiB slices, so that copies
 * cross slice boundaries all the time (with the default 1 GiB slices only slabs over 1 GiB do). Skipped where CUDA
 * cannot run.
 */
public class CudaSmallSlicesRuntimeKit extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        assumeTrue(why.isEmpty(), () -> "no CUDA here: " + why.orElse(""));
        return new CudaDeviceRuntime(CudaOptions.defaults()
                .withCopyPath(CudaOptions.CopyPath.COPY_ENGINE)
                .withRegisterSliceBytes(16 * 1024));
    }
}
