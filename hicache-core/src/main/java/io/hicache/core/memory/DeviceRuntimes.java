package io.hicache.core.memory;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import java.lang.System.Logger.Level;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.stream.Collectors;

/**
 * Finds device runtimes on the class path and opens the configured one. With {@code device.runtime = auto}
 * (the default) it opens the highest-priority runtime that can run here, and logs which one and why the
 * others could not, so a machine without a GPU runs on the emulated device and says so. Thread-safe.
 */
public final class DeviceRuntimes {
    private static final System.Logger LOG = System.getLogger(DeviceRuntimes.class.getName());

    /** Which runtime to use: a name, or {@code auto} for the best one available. */
    public static final Setting<String> RUNTIME = Setting.string(
            "device.runtime",
            "auto",
            "device runtime: auto (CUDA when a GPU is usable, else emulated), cuda or emulated");

    private DeviceRuntimes() {}

    /** Every provider on the class path, highest priority first. */
    public static List<DeviceRuntimeProvider> providers() {
        return ServiceLoader.load(DeviceRuntimeProvider.class, DeviceRuntimes.class.getClassLoader()).stream()
                .map(ServiceLoader.Provider::get)
                .sorted(Comparator.comparingInt(DeviceRuntimeProvider::priority).reversed())
                .toList();
    }

    /** The provider named {@code name}, if its module is on the class path. */
    public static Optional<DeviceRuntimeProvider> find(String name) {
        return providers().stream().filter(p -> p.name().equals(name)).findFirst();
    }

    /**
     * Opens the runtime that {@code settings} selects.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} for an unknown name,
     *     {@link ErrorCode#DEVICE_UNAVAILABLE} when the named runtime cannot run here
     */
    public static DeviceRuntime open(Settings settings) {
        String wanted = settings.get(RUNTIME);
        List<DeviceRuntimeProvider> all = providers();
        if (!wanted.equals("auto")) {
            DeviceRuntimeProvider p = all.stream()
                    .filter(x -> x.name().equals(wanted))
                    .findFirst()
                    .orElseThrow(() -> new HiCacheException(
                            ErrorCode.CONFIG_INVALID,
                            "no device runtime is named '"
                                    + wanted + "'; available: auto, "
                                    + all.stream()
                                            .map(DeviceRuntimeProvider::name)
                                            .collect(Collectors.joining(", "))));
            p.unavailableReason().ifPresent(why -> {
                throw new HiCacheException(
                        ErrorCode.DEVICE_UNAVAILABLE, "device runtime '" + wanted + "' cannot run here: " + why);
            });
            return p.open(settings);
        }
        for (DeviceRuntimeProvider p : all) {
            Optional<String> why = p.unavailableReason();
            if (why.isEmpty()) {
                DeviceRuntime runtime = p.open(settings);
                LOG.log(
                        Level.INFO,
                        () -> "device runtime: " + runtime.name() + " ("
                                + runtime.info().name() + ")");
                return runtime;
            }
            LOG.log(Level.INFO, () -> "device runtime " + p.name() + " is not available: " + why.get());
        }
        throw new HiCacheException(ErrorCode.DEVICE_UNAVAILABLE, "no device runtime can run here");
    }
}
