package io.hicache.testkit;

import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;

/** The emulated device runs the device runtime kit, with as many copy threads as it would pick here. */
class EmulatedDeviceRuntimeConformanceTest extends DeviceRuntimeConformanceKit {
    @Override
    protected DeviceRuntime openRuntime() {
        return new EmulatedDeviceRuntime(
                256L << 20, Math.min(4, Runtime.getRuntime().availableProcessors()));
    }
}
