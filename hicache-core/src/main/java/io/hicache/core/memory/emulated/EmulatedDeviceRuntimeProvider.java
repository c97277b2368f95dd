package io.hicache.core.memory.emulated;

import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.memory.DeviceRuntime;
import io.hicache.core.memory.DeviceRuntimeProvider;
import java.util.List;
import java.util.Optional;

/** Opens {@link EmulatedDeviceRuntime}s under the name {@code emulated}; it runs everywhere. Stateless. */
public final class EmulatedDeviceRuntimeProvider implements DeviceRuntimeProvider {
    /** The emulated device's memory, taken from host memory as pools are created. */
    public static final Setting<Long> MEMORY = Setting.bytes(
            "device.memory", "4GiB", "memory of the emulated device (taken from host memory as KV pools are created)");
    /** Threads that do the emulated device's copies; 0 picks min(4, cores). */
    public static final Setting<Integer> COPY_THREADS = Setting.integer(
            "device.copy-threads", 0, 0, 256, "threads that run the emulated device's copies; 0 means min(4, cores)");

    @Override
    public String name() {
        return "emulated";
    }

    @Override
    public int priority() {
        return 0;
    }

    @Override
    public Optional<String> unavailableReason() {
        return Optional.empty();
    }

    @Override
    public List<Setting<?>> settings() {
        return List.of(MEMORY, COPY_THREADS);
    }

    @Override
    public DeviceRuntime open(Settings settings) {
        int threads = settings.get(COPY_THREADS);
        if (threads == 0) {
            threads = Math.min(4, Runtime.getRuntime().availableProcessors());
        }
        return new EmulatedDeviceRuntime(Math.max(1, settings.get(MEMORY)), threads);
    }
}
