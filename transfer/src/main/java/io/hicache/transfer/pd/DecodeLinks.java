package io.hicache.transfer.pd;

import io.hicache.transfer.RemoteSegment;
import io.hicache.transfer.TransferEngine;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * The segments a prefill rank opened to decode engines: one per engine address, opened again once it died. Whoever
 * made it hears of each death (to fail the rooms that send over it). Worker thread only; the rank closes it.
 */
final class DecodeLinks implements AutoCloseable {
    private final TransferEngine engine;
    private final Duration timeout;
    private final BiConsumer<String, RemoteSegment> onDeath;
    private final Map<String, RemoteSegment> byAddress = new HashMap<>();

    /**
     * Opens segments within {@code timeout}; {@code onDeath} gets the address and segment of each that dies, on the
     * engine's thread.
     */
    DecodeLinks(TransferEngine engine, Duration timeout, BiConsumer<String, RemoteSegment> onDeath) {
        this.engine = engine;
        this.timeout = timeout;
        this.onDeath = onDeath;
    }

    /**
     * The live segment to the engine at {@code address}, opened if there is none.
     *
     * @throws io.hicache.transfer.TransferException when it cannot be opened
     */
    RemoteSegment get(String address) {
        RemoteSegment s = byAddress.get(address);
        if (s == null || !s.alive()) {
            if (s != null) {
                s.close();
            }
            s = engine.openSegment(address, timeout);
            RemoteSegment opened = s;
            s.onDeath(() -> onDeath.accept(address, opened));
            byAddress.put(address, s);
        }
        return s;
    }

    @Override
    public void close() {
        byAddress.values().forEach(RemoteSegment::close);
    }
}
