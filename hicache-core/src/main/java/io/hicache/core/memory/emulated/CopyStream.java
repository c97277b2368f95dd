package io.hicache.core.memory.emulated;

import io.hicache.core.memory.KvCopy;
import io.hicache.core.memory.LayerSignals;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * Runs copies one after another, as a CUDA stream does: a copy starts when the one submitted before it has
 * finished (or failed). Thread-safe.
 */
final class CopyStream {
    private CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);

    /** Queues a copy of {@code layers} layers; {@code start} is called when it may run, with its signals. */
    KvCopy submit(int layers, Consumer<LayerSignals> start) {
        LayerSignals signals = new LayerSignals(layers);
        CompletableFuture<Void> previous;
        synchronized (this) {
            previous = tail;
            tail = signals.done().handle((ok, failed) -> null);
        }
        previous.whenComplete((ok, failed) -> start.accept(signals));
        return signals;
    }

    /** Completes when every copy submitted so far has finished or failed. */
    synchronized CompletableFuture<Void> drained() {
        return tail;
    }
}
