package io.hicache.storage.file;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import java.nio.file.Path;
import java.util.List;

/**
 * The file store's configuration, read and checked once.
 *
 * @param root          the folder of the store; created if missing; must be empty or a file store's root
 * @param capacityBytes the most bytes of page files the store keeps, or 0 for 90% of the space its file system has
 *                      for it when it opens
 * @param lowWater      where eviction stops, as a fraction of the capacity
 * @param fsync         whether a put returns only after its page reached the disk
 * @param directIo      whether pages bypass the page cache ({@code O_DIRECT})
 * @param ioThreads     threads that read and write page files
 */
public record FileStoreConfig(
        Path root, long capacityBytes, double lowWater, boolean fsync, boolean directIo, int ioThreads) {
    public static final Setting<Path> ROOT = Setting.path(
            "file.root",
            "/tmp/hicache-file",
            "folder of the file store (one file per page, in sub-folders); must be empty or a file store's root");
    public static final Setting<Long> CAPACITY = Setting.bytes(
            "file.capacity",
            "0",
            "most bytes of page files kept (evicting least recently used pages); 0 means 90% of the space the file "
                    + "system has for the store when it opens");
    public static final Setting<Double> LOW_WATER =
            Setting.decimal("file.low-water", 0.9, 0.05, 1.0, "once over capacity, evict down to this fraction of it");
    public static final Setting<Boolean> FSYNC = Setting.bool(
            "file.fsync",
            false,
            "fsync each page file and its folder before a put returns: pages survive power loss, puts are slower");
    public static final Setting<Boolean> DIRECT_IO = Setting.bool(
            "file.direct-io",
            false,
            "read and write page files with O_DIRECT, bypassing the page cache: steady disk speed and no memory "
                    + "pressure from the cache, but no reads served from memory; needs a file system that supports it");
    public static final Setting<Integer> IO_THREADS = Setting.integer(
            "file.io-threads",
            8,
            1,
            256,
            "threads that read and write page files; a batch's pages run on them in parallel");

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS = List.of(ROOT, CAPACITY, LOW_WATER, FSYNC, DIRECT_IO, IO_THREADS);

    public FileStoreConfig {
        Checks.checkNotNull(root, "root");
        Checks.checkNotNegative(capacityBytes, "capacityBytes");
        Checks.requireArgument(lowWater > 0 && lowWater <= 1, "file.low-water must be in (0, 1], was %s", lowWater);
        Checks.checkPositive(ioThreads, "ioThreads");
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static FileStoreConfig from(Settings settings) {
        return settings.read(s -> {
            return new FileStoreConfig(
                    s.get(ROOT), s.get(CAPACITY), s.get(LOW_WATER), s.get(FSYNC), s.get(DIRECT_IO), s.get(IO_THREADS));
        });
    }

    /** The defaults, rooted at {@code root}: for tests and embedding. */
    public static FileStoreConfig at(Path root) {
        return new FileStoreConfig(root, 0, 0.9, false, false, 8);
    }

    public FileStoreConfig withCapacityBytes(long bytes) {
        return new FileStoreConfig(root, bytes, lowWater, fsync, directIo, ioThreads);
    }

    public FileStoreConfig withFsync(boolean on) {
        return new FileStoreConfig(root, capacityBytes, lowWater, on, directIo, ioThreads);
    }

    public FileStoreConfig withDirectIo(boolean on) {
        return new FileStoreConfig(root, capacityBytes, lowWater, fsync, on, ioThreads);
    }
}
