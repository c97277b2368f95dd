package io.hicache.transfer.spi;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What a segment publishes about one registered region: enough for any transport to address it. Immutable.
 *
 * @param name     the region's name, unique in its segment
 * @param id       the number frames use for it on the wire
 * @param bytes    its length
 * @param shmPath  the file in a shared-memory folder that holds its bytes, or empty when its memory is private
 * @param keys     access keys that transports returned from {@link Transport#register}, each under
 *                 {@code <transport>.<key>} (an RDMA transport would publish its rkey as {@code rdma.rkey}); may be
 *                 empty
 * @param kind     where its bytes live: a device region is reached only by a transport that moves device memory
 */
public record RegionDescriptor(
        String name, int id, long bytes, String shmPath, Map<String, String> keys, MemoryKind kind) {
    public RegionDescriptor {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(shmPath, "shmPath");
        Objects.requireNonNull(kind, "kind");
        if (kind == MemoryKind.DEVICE && !shmPath.isEmpty()) {
            throw new IllegalArgumentException("device region " + name + " cannot be a shared-memory file");
        }
        keys = Map.copyOf(keys);
        if (bytes <= 0) {
            throw new IllegalArgumentException("region " + name + " must have bytes > 0, got " + bytes);
        }
    }

    /** A host region. */
    public RegionDescriptor(String name, int id, long bytes, String shmPath, Map<String, String> keys) {
        this(name, id, bytes, shmPath, keys, MemoryKind.HOST);
    }

    /** Whether another process on the same host can map the region's memory. */
    public boolean shared() {
        return !shmPath.isEmpty();
    }

    /** The keys that the transport named {@code transport} published for this region, without their prefix. */
    public Map<String, String> keysOf(String transport) {
        String prefix = transport + ".";
        Map<String, String> mine = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : keys.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                mine.put(e.getKey().substring(prefix.length()), e.getValue());
            }
        }
        return Map.copyOf(mine);
    }
}
