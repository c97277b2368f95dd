package io.hicache.storage.nixl.spi;

import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A plugin: makes backends of one kind (NIXL's {@code POSIX}, {@code OBJ}, ...). Found with {@link java.util.ServiceLoader}
 * from {@code META-INF/services/io.hicache.storage.nixl.spi.NixlPlugin}. Implementations are stateless and
 * thread-safe; the backends they create belong to the agent that asked.
 */
public interface NixlPlugin {
    /** The plugin's name, upper case as in NIXL: {@code POSIX}, {@code OBJ}. */
    String name();

    /** Rank in automatic selection: lower is tried first (SGLang's order: 3FS, POSIX, GDS_MT, GDS, then OBJ). */
    int priority();

    /** The memory types its backends serve. */
    Set<MemoryType> memoryTypes();

    /** The parameters it reads, with their defaults (empty for none), for {@code get_plugin_params}. */
    Map<String, String> defaultParams();

    /** Why a backend could not be made with {@code params} here (a missing bucket), or empty if it can. */
    Optional<String> unavailableReason(Map<String, String> params);

    /**
     * Makes a backend.
     *
     * @throws NixlException {@link NixlStatus#ERR_INVALID_PARAM} for bad parameters, {@link NixlStatus#ERR_BACKEND}
     *     when what it needs (a bucket) cannot be reached
     */
    NixlBackend create(String agentName, Map<String, String> params);
}
