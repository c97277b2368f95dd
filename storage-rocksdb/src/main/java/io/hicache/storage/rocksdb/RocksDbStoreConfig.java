package io.hicache.storage.rocksdb;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Setting;
import io.hicache.core.config.Settings;
import io.hicache.core.util.Checks;
import java.nio.file.Path;
import java.util.List;

/**
 * The RocksDB store's configuration, read and checked once.
 *
 * @param root            the store's folder (the database is in {@code ROOT/db}); must be empty or this store's
 * @param capacityBytes   the most page bytes kept, or 0 for 90% of the space the file system has for it at open
 * @param lowWater        where oldest-first deletion stops, as a fraction of the capacity
 * @param fsync           whether a put returns only after its write-ahead log entry reached the disk
 * @param directIo        whether reads, flushes and compactions bypass the page cache
 * @param blockCacheBytes the block cache (index and filter blocks of the key tables; page bytes live in blob files)
 * @param blobMinBytes    values this large or larger go to blob files
 * @param writeBufferBytes one memtable's size
 * @param ioThreads       threads that run the store's calls (RocksDB calls block)
 */
public record RocksDbStoreConfig(
        Path root,
        long capacityBytes,
        double lowWater,
        boolean fsync,
        boolean directIo,
        long blockCacheBytes,
        long blobMinBytes,
        long writeBufferBytes,
        int ioThreads) {
    public static final Setting<Path> ROOT = Setting.path(
            "rocksdb.root", "/tmp/hicache-rocksdb", "folder of the RocksDB store; must be empty or this store's");
    public static final Setting<Long> CAPACITY = Setting.bytes(
            "rocksdb.capacity",
            "0",
            "most page bytes kept (oldest pages are deleted first); 0 means 90% of the space the file system has for "
                    + "the store when it opens");
    public static final Setting<Double> LOW_WATER = Setting.decimal(
            "rocksdb.low-water", 0.9, 0.05, 1.0, "once over capacity, delete down to this fraction of it");
    public static final Setting<Boolean> FSYNC = Setting.bool(
            "rocksdb.fsync",
            false,
            "sync the write-ahead log before a put returns: pages survive power loss, puts are slower");
    public static final Setting<Boolean> DIRECT_IO =
            Setting.bool("rocksdb.direct-io", false, "read, flush and compact with O_DIRECT, bypassing the page cache");
    public static final Setting<Long> BLOCK_CACHE = Setting.bytes(
            "rocksdb.block-cache",
            "64MiB",
            "block cache for the key tables' index and filter blocks (pages themselves are in blob files)");
    public static final Setting<Long> BLOB_MIN = Setting.bytes(
            "rocksdb.blob-min-size", "4KiB", "values at least this large are kept in blob files, out of the LSM tree");
    public static final Setting<Long> WRITE_BUFFER = Setting.bytes(
            "rocksdb.write-buffer",
            "32MiB",
            "size of one memtable; a put of a quarter of it or more skips the write-ahead log and is flushed before it returns");
    public static final Setting<Integer> IO_THREADS =
            Setting.integer("rocksdb.io-threads", 4, 1, 64, "threads that run the store's calls");

    /** Every setting read here. */
    public static final List<Setting<?>> SETTINGS =
            List.of(ROOT, CAPACITY, LOW_WATER, FSYNC, DIRECT_IO, BLOCK_CACHE, BLOB_MIN, WRITE_BUFFER, IO_THREADS);

    public RocksDbStoreConfig {
        Checks.checkNotNull(root, "root");
        Checks.checkNotNegative(capacityBytes, "capacityBytes");
        Checks.requireArgument(lowWater > 0 && lowWater <= 1, "rocksdb.low-water must be in (0, 1], was %s", lowWater);
        Checks.requireArgument(
                blockCacheBytes >= 1 << 20, "rocksdb.block-cache must be at least 1MiB, was %d", blockCacheBytes);
        Checks.requireArgument(
                writeBufferBytes >= 1 << 20, "rocksdb.write-buffer must be at least 1MiB, was %d", writeBufferBytes);
        Checks.checkPositive(ioThreads, "ioThreads");
    }

    /**
     * Reads the configuration.
     *
     * @throws HiCacheException {@link ErrorCode#CONFIG_INVALID} naming the bad setting
     */
    public static RocksDbStoreConfig from(Settings settings) {
        return settings.read(s -> {
            return new RocksDbStoreConfig(
                    s.get(ROOT),
                    s.get(CAPACITY),
                    s.get(LOW_WATER),
                    s.get(FSYNC),
                    s.get(DIRECT_IO),
                    s.get(BLOCK_CACHE),
                    s.get(BLOB_MIN),
                    s.get(WRITE_BUFFER),
                    s.get(IO_THREADS));
        });
    }

    /** The defaults, rooted at {@code root}: for tests and embedding. */
    public static RocksDbStoreConfig at(Path root) {
        return new RocksDbStoreConfig(root, 0, 0.9, false, false, 64L << 20, 4096, 32L << 20, 4);
    }

    public RocksDbStoreConfig withCapacityBytes(long bytes) {
        return new RocksDbStoreConfig(
                root, bytes, lowWater, fsync, directIo, blockCacheBytes, blobMinBytes, writeBufferBytes, ioThreads);
    }

    public RocksDbStoreConfig withFsync(boolean on) {
        return new RocksDbStoreConfig(
                root,
                capacityBytes,
                lowWater,
                on,
                directIo,
                blockCacheBytes,
                blobMinBytes,
                writeBufferBytes,
                ioThreads);
    }

    public RocksDbStoreConfig withDirectIo(boolean on) {
        return new RocksDbStoreConfig(
                root, capacityBytes, lowWater, fsync, on, blockCacheBytes, blobMinBytes, writeBufferBytes, ioThreads);
    }
}
