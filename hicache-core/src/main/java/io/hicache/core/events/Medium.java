package io.hicache.core.events;

/**
 * The tier an event's pages are in, with the names SGLang's {@code StorageMedium} puts on the wire
 * ({@code disaggregation/kv_events.py}): routers that track tiers (Dynamo's indexer) know these four strings.
 * Immutable.
 */
public enum Medium {
    /** L1: device memory ({@code "GPU"}). */
    GPU("GPU"),
    /** L2: pinned host memory ({@code "CPU_PINNED"}): the host pool, the daemon's slab. */
    CPU("CPU_PINNED"),
    /** L3 on local disk ({@code "DISK"}): a page store that is not shared (file, RocksDB). */
    DISK("DISK"),
    /** L3 shared by many engines ({@code "EXTERNAL"}): a store that declares {@code SHARED} (S3, a daemon, NIXL). */
    EXTERNAL("EXTERNAL");

    private final String wireName;

    Medium(String wireName) {
        this.wireName = wireName;
    }

    /** The string SGLang sends for this tier. */
    public String wireName() {
        return wireName;
    }

    /** The medium of a page store (L3): {@link #EXTERNAL} if it is shared between processes, else {@link #DISK}. */
    public static Medium ofStore(boolean shared) {
        return shared ? EXTERNAL : DISK;
    }
}
