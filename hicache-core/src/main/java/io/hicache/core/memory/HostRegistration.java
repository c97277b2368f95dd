package io.hicache.core.memory;

/**
 * Host memory registered with a device runtime so that copies can reach it directly (CUDA pins and maps it;
 * the emulated runtime has nothing to do). The host page pool holds one for its slab and closes it before it
 * unmaps the slab. Closing is idempotent. Thread-safe.
 */
public interface HostRegistration extends AutoCloseable {
    /** Bytes registered. */
    long bytes();

    /** True when the memory is pinned for direct device access. */
    boolean pinned();

    /** Unregisters the memory. */
    @Override
    void close();
}
