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
 * The device runtime kit against the CUDA copy kernel shaped unlike {@link CudaTuning#DEFAULT} in every respect
 * (another kernel, another number of load lanes, the other walk order, several layers per load launch), so that the
 * paths the default does not take are verified too. Skipped where CUDA cannot run.
 */
public class CudaAlternateTuningRuntimeKit extends DeviceRuntimeConformanceKit {
    /** The shape this kit runs. */
    public static CudaTuning alternate() {
        CudaTuning d = CudaTuning.DEFAULT;
        return new CudaTuning(
                d.kernel() == CudaTuning.Kernel.WIDE ? CudaTuning.Kernel.NARROW : CudaTuning.Kernel.WIDE,
                d.loadLanes() == 1 ? 2 : 1,
                !d.hostOrder(),
                d.layersPerLoadLaunch() == 1 ? 3 : 1, // 3: groups that do not divide the kit's layer counts evenly
                d.backupBlocksPerMultiprocessor() == 8 ? 1 : 8, // the fewest, or the most, blocks for a backup
                !d.prioritizeLoads());
    }

    @Override
    protected DeviceRuntime openRuntime() {
        Optional<String> why = new CudaDeviceRuntimeProvider().unavailableReason();
        assumeTrue(why.isEmpty(), () -> "no CUDA here: " + why.orElse(""));
        return new CudaDeviceRuntime(CudaOptions.defaults().withTuning(alternate()));
    }
}
