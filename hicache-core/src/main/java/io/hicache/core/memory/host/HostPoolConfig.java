package io.hicache.core.memory.host;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.config.Units;
import io.hicache.core.page.HostLayout;
import io.hicache.core.util.Checks;
import java.nio.file.Path;
import java.util.List;

/**
 * The host page pool's configuration, read and checked once. Sizes follow SGLang: {@code hicache-size} (GB of
 * 10^9 bytes, per rank) when set, else {@code hicache-ratio} times the device pool.
 *
 * @param ratio              host pages per device page when {@code sizeGb} is 0; above 1
 * @param sizeGb             host pool size in GB of 10^9 bytes, or 0 to use {@code ratio}
 * @param layout             host layout ({@code hicache-mem-layout})
 * @param dir                folder of the slab, index and meta files; a tmpfs so CUDA can pin the slab
 * @param name               file name prefix, so several pools can share a folder
 * @param memoryReserveBytes host memory to leave free beyond the slab, or -1 for min(10 GiB, a quarter of RAM)
 * @param keep               whether the pool's files stay in {@code dir} when it closes, for a warm reopen
 */
public record HostPoolConfig(
        double ratio, double sizeGb, HostLayout layout, Path dir, String name, long memoryReserveBytes, boolean keep) {
    public static final Setting<Double> RATIO = Setting.decimal(
            "hicache-ratio",
            2.0,
            1.0,
            1_000.0,
            "host pool size as a multiple of the device pool (used when hicache-size is 0); must be above 1");
    public static final Setting<Double> SIZE_GB = Setting.decimal(
            "hicache-size", 0, 0, 1_000_000, "host pool size in GB (10^9 bytes) per rank; 0 sizes it by hicache-ratio");
    public static final Setting<HostLayout> LAYOUT = Setting.choice(
            "hicache-mem-layout",
            HostLayout.class,
            HostLayout::configName,
            HostLayout.PAGE_FIRST_DIRECT,
            "host layout; page_first_direct keeps each page in one block (stores need no staging copy) and moves "
                    + "page-by-layer runs to the device");
    public static final Setting<Path> DIR = Setting.path(
            "host.dir",
            "/dev/shm",
            "folder for the host slab and its index: a tmpfs (or hugetlbfs) so that CUDA can pin the slab");
    public static final Setting<String> NAME = Setting.string(
            "host.name", "hicache", "file name prefix of the host pool, so several pools can share host.dir");
    public static final Setting<String> MEMORY_RESERVE = Setting.string(
            "host.memory-reserve",
            "auto",
            "host memory to leave free beyond the slab; auto means min(10GiB, a quarter of RAM)");

    public static final Setting<Boolean> KEEP = Setting.bool(
            "host.keep",
            true,
            "keep the host pool's files (slab, index, journal) in host.dir when the cache closes, so that the next "
                    + "open with the same host.dir and host.name starts warm; false deletes them at close");

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS = List.of(RATIO, SIZE_GB, LAYOUT, DIR, NAME, MEMORY_RESERVE, KEEP);

    /** A pool whose files stay when it closes ({@code host.keep}, the default). */
    public HostPoolConfig(
            double ratio, double sizeGb, HostLayout layout, Path dir, String name, long memoryReserveBytes) {
        this(ratio, sizeGb, layout, dir, name, memoryReserveBytes, true);
    }

    public HostPoolConfig {
        Checks.requireArgument(
                ratio > 1.0 || sizeGb > 0,
                "hicache-ratio must be above 1 (the host pool must be larger than the device pool), was %s",
                ratio);
        Checks.checkNotNull(layout, "layout");
        Checks.checkNotNull(dir, "dir");
        Checks.requireArgument(
                name.matches("[A-Za-z0-9._-]+"), "host.name '%s' must be letters, digits, '.', '_' or '-'", name);
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static HostPoolConfig from(Settings settings) {
        String reserve = settings.get(MEMORY_RESERVE).trim();
        long reserveBytes;
        try {
            reserveBytes = reserve.equalsIgnoreCase("auto") ? -1 : Units.parseBytes(reserve);
        } catch (IllegalArgumentException e) {
            throw new HiCacheException(
                    ErrorCode.CONFIG_INVALID,
                    "setting 'host.memory-reserve' = '" + reserve + "': expected auto or a byte size such as 8GiB",
                    e);
        }
        return settings.read(s -> new HostPoolConfig(
                s.get(RATIO), s.get(SIZE_GB), s.get(LAYOUT), s.get(DIR), s.get(NAME), reserveBytes, s.get(KEEP)));
    }

    /** The defaults, with the files in {@code dir}: for tests and embedding. */
    public static HostPoolConfig inDir(Path dir, HostLayout layout) {
        return new HostPoolConfig(2.0, 0, layout, dir, "hicache", -1);
    }
}
