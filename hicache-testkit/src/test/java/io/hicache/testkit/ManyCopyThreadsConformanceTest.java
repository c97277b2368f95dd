package io.hicache.testkit;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;

/** The emulated device with eight copy threads on a two-core machine: shares interleave in every order. */
class ManyCopyThreadsConformanceTest extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        return new EmulatedDeviceRuntime(256L << 20, 8);
    }
}
