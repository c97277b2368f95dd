package io.hicache.transfer.spi;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ScheduledExecutorService;

/**
 * What an engine gives the transports it creates: its settings that concern moving bytes, its timer and its local
 * segment. Immutable; the timer and the segment are the engine's and thread-safe.
 *
 * @param engineName               the engine's name (peers know it by it; threads are named after it)
 * @param bindHost                 the address listeners bind to
 * @param ioThreads                threads a transport may give its I/O
 * @param connectionsPerPeer       connections (or queue pairs) a transport opens to each peer
 * @param windowBytesPerConnection bytes in flight on one connection before further slices wait
 * @param sliceTimeoutMillis       a slice on the wire longer than this fails its connection
 * @param connectTimeoutMillis     one connection attempt
 * @param shmDir                   the engine's shared-memory folder, where a transport may put files that same-host
 *                                 peers open (sockets, handles)
 * @param timer                    the engine's timer thread, for sweeps and retries; tasks must be short
 * @param local                    this engine's regions, for serving peers' requests
 * @param options                  transports' own settings, each under {@code <transport>.<key>}
 */
public record TransportContext(
        String engineName,
        String bindHost,
        int ioThreads,
        int connectionsPerPeer,
        long windowBytesPerConnection,
        long sliceTimeoutMillis,
        long connectTimeoutMillis,
        Path shmDir,
        ScheduledExecutorService timer,
        LocalSegment local,
        Map<String, String> options) {
    public TransportContext {
        Objects.requireNonNull(engineName, "engineName");
        Objects.requireNonNull(bindHost, "bindHost");
        Objects.requireNonNull(shmDir, "shmDir");
        Objects.requireNonNull(timer, "timer");
        Objects.requireNonNull(local, "local");
        options = Map.copyOf(options);
    }

    /** The options set for the transport named {@code transport}, without their prefix. */
    public Map<String, String> optionsOf(String transport) {
        String prefix = transport + ".";
        Map<String, String> mine = new LinkedHashMap<>();
        options.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                mine.put(k.substring(prefix.length()), v);
            }
        });
        return Map.copyOf(mine);
    }
}
