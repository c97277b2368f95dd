package io.hicache.storage.nixl.posix;

import io.hicache.storage.nixl.spi.MemoryType;
import io.hicache.storage.nixl.spi.NixlBackend;
import io.hicache.storage.nixl.spi.NixlException;
import io.hicache.storage.nixl.spi.NixlPlugin;
import io.hicache.storage.nixl.spi.NixlStatus;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The {@code POSIX} plugin: files, read and written with positional I/O on a pool of I/O threads, optionally with
 * direct I/O. Parameters: {@code io_threads} (default 8), {@code block_bytes} (direct I/O alignment, default 4096),
 * {@code fsync} (sync each written file before its transfer succeeds, default false). Stateless.
 */
public final class PosixPlugin implements NixlPlugin {
    public static final String NAME = "POSIX";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return 20;
    }

    @Override
    public Set<MemoryType> memoryTypes() {
        return Set.of(MemoryType.DRAM, MemoryType.FILE);
    }

    @Override
    public Map<String, String> defaultParams() {
        return Map.of("io_threads", "8", "block_bytes", "4096", "fsync", "false");
    }

    @Override
    public Optional<String> unavailableReason(Map<String, String> params) {
        return Optional.empty();
    }

    @Override
    public NixlBackend create(String agentName, Map<String, String> params) {
        int threads = intParam(params, "io_threads", 8, 1, 1024);
        int block = intParam(params, "block_bytes", 4096, 512, 1 << 20);
        if (Integer.bitCount(block) != 1) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, "block_bytes must be a power of two, was " + block);
        }
        return new PosixBackend(agentName, threads, block, Boolean.parseBoolean(params.getOrDefault("fsync", "false")));
    }

    static int intParam(Map<String, String> params, String key, int byDefault, int min, int max) {
        String text = params.get(key);
        if (text == null) {
            return byDefault;
        }
        try {
            int v = Integer.parseInt(text.trim());
            if (v < min || v > max) {
                throw new NixlException(
                        NixlStatus.ERR_INVALID_PARAM, key + " must be in [" + min + ", " + max + "], was " + v);
            }
            return v;
        } catch (NumberFormatException e) {
            throw new NixlException(NixlStatus.ERR_INVALID_PARAM, key + " is not a number: '" + text + "'");
        }
    }
}
