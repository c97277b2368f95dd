package io.hicache.testkit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.cuda.CudaDeviceRuntime;
import io.hicache.core.memory.cuda.CudaDeviceRuntimeProvider;
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
        return new CudaDeviceRuntime(0, false, 16 * 1024);
    }
}
