package io.hicache.transfer.spi;

import io.hicache.transfer.TransferConfig;
import java.util.concurrent.ScheduledExecutorService;

/**
 * What an engine gives the transports it creates. Thread-safe.
 *
 * @param config the engine's configuration
 * @param timer  the engine's timer thread, for sweeps and retries; tasks must be short
 */
public record TransportContext(TransferConfig config, ScheduledExecutorService timer) {
}
