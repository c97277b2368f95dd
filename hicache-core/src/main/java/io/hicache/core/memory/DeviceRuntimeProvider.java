package io.hicache.core.memory;

import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import java.util.List;
import java.util.Optional;

/**
 * Opens device runtimes of one kind; found with {@link java.util.ServiceLoader} by {@link #name()}.
 * Stateless and thread-safe, with a public no-argument constructor.
 */
public interface DeviceRuntimeProvider {
    /** The runtime's name in configuration ({@code device.runtime}). */
    String name();

    /** Preference when the configuration says {@code auto}: the highest available one wins. */
    int priority();

    /**
     * Why this runtime cannot run on this machine (no driver, no device), or empty when it can. Checked once
     * and cached by implementations: the answer does not change while the process runs.
     */
    Optional<String> unavailableReason();

    /** Every setting the runtime reads. */
    List<Setting<?>> settings();

    /**
     * Opens the runtime.
     *
     * @throws io.hicache.core.HiCacheException {@link io.hicache.core.ErrorCode#DEVICE_UNAVAILABLE} when it
     *     cannot run here
     */
    DeviceRuntime open(Settings settings);
}
