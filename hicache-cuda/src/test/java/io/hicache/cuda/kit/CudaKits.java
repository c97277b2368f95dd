package io.hicache.cuda.kit;

import io.hicache.testkit.ConformanceReport;
import io.hicache.testkit.ConformanceRunner;
import java.util.List;

/**
 * The entry that runs the device runtime kit against the five CUDA targets (copy kernel, copy engine, copy engine
 * across 16 KiB registration slices, copy kernel shaped unlike the default, copy kernel with loads launched 3 layers at
 * a time), through the JUnit Platform launcher.
 * The GPU entry point ({@code io.hicache.bench.GpuRun}) calls it on the GPU machine; in the build the
 * {@code *ConformanceTest} subclasses run the same kits, skipping every case where CUDA cannot run. Stateless.
 */
public final class CudaKits {
    private CudaKits() {}

    /** Runs the five kits and returns one report each, in the order above. */
    public static List<ConformanceReport> run() {
        return List.of(
                ConformanceRunner.run(CudaKernelRuntimeKit.class, "CUDA runtime, copy kernel"),
                ConformanceRunner.run(CudaCopyEngineRuntimeKit.class, "CUDA runtime, copy engine"),
                ConformanceRunner.run(
                        CudaSmallSlicesRuntimeKit.class, "CUDA runtime, copy engine, 16 KiB registration slices"),
                ConformanceRunner.run(
                        CudaAlternateTuningRuntimeKit.class,
                        "CUDA runtime, copy kernel, " + CudaAlternateTuningRuntimeKit.alternate()),
                ConformanceRunner.run(
                        CudaGroupedLoadsRuntimeKit.class, "CUDA runtime, copy kernel, 3 layers per load launch"));
    }
}
