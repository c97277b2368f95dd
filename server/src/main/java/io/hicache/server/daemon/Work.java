package io.hicache.server.daemon;

import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * A decoded request's work, as its handler made it: {@code inline} tries it on the event loop without blocking (true:
 * done and answered); otherwise {@code onWorker} runs it on a worker, or, where {@code later} is given, {@code later}
 * starts it on a worker and the request is done (answered) when the future it returns completes. Immutable.
 */
record Work(
        BooleanSupplier inline,
        @Nullable Runnable onWorker,
        @Nullable Supplier<CompletableFuture<?>> later) {
    /** Work tried on the event loop first, finished on a worker when it cannot be done there. */
    Work(BooleanSupplier inline, Runnable onWorker) {
        this(inline, onWorker, null);
    }

    /** Work that is always quick: it runs on the event loop. */
    static Work quick(Runnable r) {
        return new Work(
                () -> {
                    r.run();
                    return true;
                },
                r);
    }

    /** Work that may block: it always goes to a worker. */
    static Work slow(Runnable r) {
        return new Work(() -> false, r);
    }

    /** Work that starts on a worker and is answered when the future {@code start} returns completes. */
    static Work deferred(Supplier<CompletableFuture<?>> start) {
        return new Work(() -> false, null, start);
    }
}
