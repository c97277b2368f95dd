package io.hicache.storage.nixl;

import io.hicache.storage.nixl.agent.MemoryRegion;
import java.io.IOException;
import java.util.List;

/**
 * Where the NIXL store's pages live for one plugin, and the housekeeping NIXL has no call for (delete, list). A page
 * is named by its store key's text {@code <namespace id>/<page hash>} ({@link io.hicache.core.key.StoreKey#toString()}).
 * Implementations are thread-safe.
 */
interface StorageLayout extends AutoCloseable {
    /** For logs: the folders, or the bucket and prefix. */
    String location();

    /** The region to read page {@code name}, stored with its trailer in {@code storedBytes}. */
    MemoryRegion readRegion(String name, long storedBytes);

    /** The region to write page {@code name} (creating what it needs, such as its folder). */
    MemoryRegion writeRegion(String name, long storedBytes) throws IOException;

    /** Removes page {@code name}; false when it was not there. */
    boolean delete(String name) throws IOException;

    /** Removes every page whose name starts with {@code namespaceId + "/"}, or every page for null. */
    void clear(String namespaceId) throws IOException;

    /** The pages stored now, for the index a store builds when it opens. */
    List<Found> scan() throws IOException;

    /** A stored page: its name, stored bytes and last modification (ms since the epoch). */
    record Found(String name, long bytes, long modifiedMillis) {
    }

    @Override
    void close();
}
