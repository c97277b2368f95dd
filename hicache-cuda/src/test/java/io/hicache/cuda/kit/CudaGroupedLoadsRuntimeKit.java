package io.hicache.cuda.kit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntime;
import io.hicache.cuda.CudaDeviceRuntimeProvider;
import io.hicache.cuda.CudaOptions;
import io.hicache.cuda.CudaTuning;
import io.hicache.testkit.DeviceRuntimeConformanceKit;
import java.util.Optional;

/**
 * The device runtime kit against {@link CudaTuning#DEFAULT} with loads launched 3 layers at a time: grouped launches
 * alternating over the default's lanes, groups that do not divide the kit's layer counts evenly. Skipped where CUDA
 * cannot run.
 */
public class CudaGroupedLoadsRuntimeKit extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        assumeTrue(why.isEmpty(), () -> "no CUDA here: " + why.orElse(""));
        return new CudaDeviceRuntime(CudaOptions.defaults().withTuning(CudaTuning.DEFAULT.withLayersPerLoadLaunch(3)));
    }
}
