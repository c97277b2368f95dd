package io.hicache.core.memory.host;

import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import io.hicache.core.config.Units;
import io.hicache.core.page.PageFormat;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * How many pages the host pool holds, and whether they fit. Sizes as SGLang does ({@code hicache-size} GB, else
 * {@code hicache-ratio} times the device pool, and always more pages than the device pool), and refuses, with the
 * sizes in the message, a slab that would not fit in the tmpfs or would leave too little host memory: running
 * out of tmpfs later would kill the process with SIGBUS on a page write. Stateless.
 */
final class HostPoolSizing {
    static final long DEFAULT_RESERVE_CAP_BYTES = 10L << 30;

    private HostPoolSizing() {}

    /**
     * The number of host pages for a device pool of {@code devicePages} pages of {@code format}.
     *
     * @throws HiCacheException {@link ErrorCode#HOST_POOL_TOO_LARGE} when the host pool would not be larger than
     *     the device pool, or would not fit in an int
     */
    static int slots(HostPoolConfig config, PageFormat format, int devicePages) {
        long pages = config.sizeGb() > 0
                ? (long) (config.sizeGb() * 1e9 / format.pageBytes())
                : (long) Math.ceil(devicePages * config.ratio());
        if (pages <= devicePages) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_TOO_LARGE,
                    "the host pool must hold more pages than the device"
                            + " pool: hicache-size " + config.sizeGb() + " GB is " + pages + " pages of "
                            + Units.formatBytes(format.pageBytes()) + ", the device pool has " + devicePages);
        }
        if (pages > Integer.MAX_VALUE) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_TOO_LARGE,
                    "a host pool of " + pages
                            + " pages is more than one pool can index; use larger pages or a smaller pool");
        }
        return (int) pages;
    }

    /**
     * Checks that a slab of {@code slabBytes} fits in {@code dir}'s file system and in host memory, counting
     * {@code alreadyAllocatedBytes} of an existing slab file as already in place.
     *
     * @throws HiCacheException {@link ErrorCode#HOST_POOL_TOO_LARGE} naming the sizes
     */
    public static void checkFits(HostPoolConfig config, long slabBytes, long alreadyAllocatedBytes) {
        long needed = slabBytes - alreadyAllocatedBytes;
        if (needed <= 0) {
            return;
        }
        try {
            long usable = Files.getFileStore(config.dir()).getUsableSpace();
            if (needed > usable) {
                throw new HiCacheException(
                        ErrorCode.HOST_POOL_TOO_LARGE,
                        "the host slab needs "
                                + Units.formatBytes(needed) + " more in " + config.dir() + ", which has "
                                + Units.formatBytes(usable)
                                + " free; lower hicache-ratio or hicache-size, or point host.dir at a"
                                + " larger tmpfs");
            }
        } catch (IOException e) {
            throw new HiCacheException(
                    ErrorCode.HOST_POOL_UNAVAILABLE,
                    "cannot read the free space of " + config.dir() + ": " + e.getMessage(),
                    e);
        }
        Optional<long[]> memory = meminfo();
        if (memory.isPresent()) {
            long total = memory.get()[0];
            long available = memory.get()[1];
            long reserve = config.memoryReserveBytes() >= 0
                    ? config.memoryReserveBytes()
                    : Math.min(DEFAULT_RESERVE_CAP_BYTES, total / 4);
            if (needed > available - reserve) {
                throw new HiCacheException(
                        ErrorCode.HOST_POOL_TOO_LARGE,
                        "the host slab needs "
                                + Units.formatBytes(needed) + " of host memory; " + Units.formatBytes(available)
                                + " is available and " + Units.formatBytes(reserve)
                                + " must stay free (host.memory-reserve)"
                                + "; lower hicache-ratio or hicache-size");
            }
        }
    }

    /** MemTotal and MemAvailable in bytes, where /proc/meminfo exists. */
    private static Optional<long[]> meminfo() {
        try {
            long total = -1;
            long available = -1;
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (line.startsWith("MemTotal:")) {
                    total = kib(line);
                } else if (line.startsWith("MemAvailable:")) {
                    available = kib(line);
                }
            }
            return total > 0 && available >= 0 ? Optional.of(new long[] {total, available}) : Optional.empty();
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static long kib(String line) {
        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
    }
}
