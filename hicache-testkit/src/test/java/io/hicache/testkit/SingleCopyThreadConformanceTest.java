package io.hicache.testkit;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;

/** The emulated device with a single copy thread: every share of a copy runs on one thread, in order. */
class SingleCopyThreadConformanceTest extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        return new EmulatedDeviceRuntime(256L << 20, 1);
    }
}
