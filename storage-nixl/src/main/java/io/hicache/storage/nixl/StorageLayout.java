package io.hicache.storage.nixl;

import io.hicache.storage.nixl.spi.MemoryRegion;
import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.io.IOException;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Where the NIXL store's pages live in one kind of storage, and the housekeeping NIXL has no call for (delete, list).
 * A page is named by its store key's text {@code <namespace id>/<page hash>}
 * ({@link io.hicache.core.key.StoreKey#toString()}). Chosen by the storage memory type the plugin declares, not by the
 * plugin's name, so a new plugin for files or objects needs no change here. Implementations are thread-safe.
 */
interface StorageLayout extends AutoCloseable {
    /**
     * The layout for the storage {@code plugin} serves, files before objects: pages as files in {@code nixl.dirs}
     * ({@link FileLayout}, direct I/O probed through {@code agent} when asked for) or as objects in the {@code s3.*}
     * bucket ({@link ObjLayout}).
     *
     * @throws NixlException {@link NixlStatus#ERR_NOT_SUPPORTED} for a plugin that serves neither
     */
    static StorageLayout open(NixlPlugin plugin, NixlStoreConfig config, NixlAgent agent) throws IOException {
        if (plugin.memoryTypes().contains(MemoryType.FILE)) {
            return FileLayout.open(config, agent);
        }
        if (plugin.memoryTypes().contains(MemoryType.OBJ)) {
            return ObjLayout.open(config);
        }
        throw new NixlException(
                NixlStatus.ERR_NOT_SUPPORTED,
                "the nixl store keeps pages in FILE or OBJ storage; " + "plugin " + plugin.name() + " serves "
                        + plugin.memoryTypes());
    }

    /** For logs: the folders, or the bucket and prefix. */
    String location();

    /** Where page {@code name} is stored: a file path or an object key. */
    String where(String name);

    /**
     * The capacity when {@code nixl.capacity} is 0, given the bytes stored now: a share of the file system for files,
     * 0 (no limit) for objects.
     */
    long defaultCapacityBytes(long storedBytes) throws IOException;

    /** The region to read page {@code name}, stored with its trailer in {@code storedBytes}. */
    MemoryRegion readRegion(String name, long storedBytes);

    /** The region to write page {@code name} (creating what it needs, such as its folder). */
    MemoryRegion writeRegion(String name, long storedBytes) throws IOException;

    /** Removes page {@code name}; false when it was not there. */
    boolean delete(String name) throws IOException;

    /** Removes every page whose name starts with {@code namespaceId + "/"}, or every page for null. */
    void clear(@Nullable String namespaceId) throws IOException;

    /** The pages stored now, for the index a store builds when it opens. */
    List<Found> scan() throws IOException;

    /** A stored page: its name, stored bytes and last modification (ms since the epoch). */
    record Found(String name, long bytes, long modifiedMillis) {}

    @Override
    void close();
}
