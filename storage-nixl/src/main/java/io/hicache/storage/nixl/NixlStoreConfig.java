package io.hicache.storage.nixl;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import io.hicache.storage.s3.client.S3Config;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The NIXL store's configuration, read and checked once.
 *
 * @param plugin             {@code auto}, or a plugin's name: {@code POSIX}, {@code OBJ}, or another found with
 *                           {@link java.util.ServiceLoader}
 * @param dirs               base folders of the POSIX plugin's page files (a page goes to one by a hash of its key)
 * @param directIo           whether the POSIX plugin bypasses the page cache ({@code O_DIRECT})
 * @param ioThreads          the POSIX plugin's I/O threads
 * @param capacityBytes      the most page bytes kept, 0 for 90% of the first folder's file system (POSIX) or no limit
 *                           (OBJ)
 * @param highWater          where the cleaner starts, as a fraction of the capacity
 * @param lowWater           where the cleaner stops, as a fraction of the capacity
 * @param registrationCache  storage registrations kept between transfers; 0 registers per transfer, as SGLang does
 * @param objParams          the OBJ plugin's parameters: the {@code s3.*} settings given
 */
public record NixlStoreConfig(
        String plugin,
        List<Path> dirs,
        boolean directIo,
        int ioThreads,
        long capacityBytes,
        double highWater,
        double lowWater,
        int registrationCache,
        Map<String, String> objParams) {
    public static final Setting<String> PLUGIN = Setting.string(
            "nixl.plugin",
            "auto",
            "the NIXL plugin: POSIX (files), OBJ (S3 objects), or auto (the first that can run: POSIX, then OBJ)");
    public static final Setting<String> DIRS = Setting.string(
            "nixl.dirs",
            "/tmp/hicache-nixl",
            "base folders of the POSIX plugin's page files, comma-separated; pages spread over them by key");
    public static final Setting<Boolean> DIRECT_IO = Setting.bool(
            "nixl.direct-io",
            false,
            "POSIX plugin: read and write page files with O_DIRECT (bounce buffers for unaligned parts)");
    public static final Setting<Integer> IO_THREADS = Setting.integer(
            "nixl.io-threads",
            8,
            1,
            1024,
            "POSIX plugin: I/O threads; a batch's files are read and written on them in parallel");
    public static final Setting<Long> CAPACITY = Setting.bytes(
            "nixl.capacity",
            "0",
            "most page bytes kept; 0 means 90% of the first folder's file system (POSIX) or no limit (OBJ)");
    public static final Setting<Double> HIGH_WATER = Setting.decimal(
            "nixl.high-water",
            0.8,
            0.05,
            1.0,
            "the cleaner starts deleting the least recently used pages past this fraction of the capacity");
    public static final Setting<Double> LOW_WATER =
            Setting.decimal("nixl.low-water", 0.7, 0.05, 1.0, "the cleaner stops at this fraction of the capacity");
    public static final Setting<Integer> REGISTRATION_CACHE = Setting.integer(
            "nixl.registration-cache",
            4096,
            0,
            1 << 20,
            "storage-side registrations kept between transfers (open files, for POSIX); 0 registers each "
                    + "page per transfer, as SGLang does");

    /** The plugin parameter {@code nixl.io-threads} is offered as: the POSIX plugin's name for it. */
    static final String IO_THREADS_PARAM = "io_threads";

    /** The store's own settings; the provider adds the {@code s3.*} ones for the OBJ plugin. */
    public static final List<Setting<?>> SETTINGS =
            List.of(PLUGIN, DIRS, DIRECT_IO, IO_THREADS, CAPACITY, HIGH_WATER, LOW_WATER, REGISTRATION_CACHE);

    public NixlStoreConfig {
        Checks.checkNotNull(plugin, "plugin");
        dirs = List.copyOf(dirs);
        Checks.requireArgument(!dirs.isEmpty(), "nixl.dirs names no folder");
        Checks.checkPositive(ioThreads, "ioThreads");
        Checks.checkNotNegative(capacityBytes, "capacityBytes");
        Checks.requireArgument(
                lowWater > 0 && lowWater <= highWater && highWater <= 1,
                "need 0 < nixl.low-water <= nixl.high-water <= 1; got %s and %s",
                lowWater,
                highWater);
        Checks.checkNotNegative(registrationCache, "registrationCache");
        objParams = Map.copyOf(objParams);
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static NixlStoreConfig from(Settings settings) {
        return settings.read(s -> {
            List<Path> dirs = new ArrayList<>();
            for (String d : s.get(DIRS).split(",")) {
                if (!d.isBlank()) {
                    dirs.add(Path.of(d.trim()));
                }
            }
            Map<String, String> obj = new LinkedHashMap<>();
            for (Setting<?> setting : S3Config.SETTINGS) {
                s.lookup(setting.key()).ifPresent(v -> obj.put(setting.key(), v.text()));
            }
            return new NixlStoreConfig(
                    s.get(PLUGIN).trim(),
                    dirs,
                    s.get(DIRECT_IO),
                    s.get(IO_THREADS),
                    s.get(CAPACITY),
                    s.get(HIGH_WATER),
                    s.get(LOW_WATER),
                    s.get(REGISTRATION_CACHE),
                    obj);
        });
    }

    /** The POSIX plugin over {@code dirs}, defaults otherwise: for tests and embedding. */
    public static NixlStoreConfig posix(List<Path> dirs) {
        return new NixlStoreConfig("POSIX", dirs, false, 8, 0, 0.8, 0.7, 4096, Map.of());
    }

    /** The OBJ plugin with {@code s3.*} parameters, defaults otherwise: for tests and embedding. */
    public static NixlStoreConfig obj(Map<String, String> s3Params) {
        return new NixlStoreConfig("OBJ", List.of(Path.of("/tmp/hicache-nixl")), false, 8, 0, 0.8, 0.7, 4096, s3Params);
    }

    public NixlStoreConfig withCapacityBytes(long bytes) {
        return new NixlStoreConfig(
                plugin, dirs, directIo, ioThreads, bytes, highWater, lowWater, registrationCache, objParams);
    }

    public NixlStoreConfig withDirectIo(boolean on) {
        return new NixlStoreConfig(
                plugin, dirs, on, ioThreads, capacityBytes, highWater, lowWater, registrationCache, objParams);
    }

    public NixlStoreConfig withRegistrationCache(int entries) {
        return new NixlStoreConfig(
                plugin, dirs, directIo, ioThreads, capacityBytes, highWater, lowWater, entries, objParams);
    }

    /**
     * The parameters the store offers its plugin: {@code io_threads} and the {@code s3.*} settings given. Each plugin
     * takes those it names in its {@code defaultParams()}, so the store need not know which plugin it runs.
     */
    Map<String, String> pluginParams() {
        Map<String, String> params = new LinkedHashMap<>(objParams);
        params.put(IO_THREADS_PARAM, Integer.toString(ioThreads));
        return params;
    }

    /** The secret is never printed. */
    @Override
    public String toString() {
        return "NixlStoreConfig[plugin=" + plugin + ", dirs=" + dirs + ", directIo=" + directIo + ", ioThreads="
                + ioThreads + ", capacityBytes=" + capacityBytes + ", highWater=" + highWater + ", lowWater=" + lowWater
                + ", registrationCache=" + registrationCache + ", objParams=" + objParams.keySet() + "]";
    }
}
