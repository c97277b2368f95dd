package io.hicache.core.memory;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A copy submitted to a device runtime, with a completion signal per layer. Layers complete in order: when
 * layer i is done, so are layers 0 to i-1, so an engine can start attention on layer i while later layers
 * are still copying. A copy of all layers at once (a backup) completes every layer together.
 *
 * <p>A failed copy completes its futures exceptionally with a {@link HiCacheException}
 * ({@link ErrorCode#COPY_FAILED}). Until {@link #done()} completes, the caller must keep the source and
 * destination pages allocated and must not touch the destination. Thread-safe.
 */
public interface KvCopy {
    /** Number of layers; {@link #layerDone(int)} takes {@code [0, layers)}. */
    int layers();

    /** Completes when layer {@code layer} (and every layer before it) has been copied. */
    CompletableFuture<Void> layerDone(int layer);

    /** Completes when the whole copy is done. */
    CompletableFuture<Void> done();

    /**
     * Waits for layer {@code layer} until {@code deadline}.
     *
     * @return true when the layer is done, false when the deadline passed or was cancelled first
     * @throws HiCacheException when the copy failed
     */
    default boolean awaitLayer(int layer, Deadline deadline) throws InterruptedException {
        return awaitLayer(layer, deadline, WaitMode.PARK);
    }

    /**
     * Waits for layer {@code layer} until {@code deadline}, parking or spinning as {@code mode} says.
     *
     * @return true when the layer is done, false when the deadline passed or was cancelled first
     * @throws HiCacheException when the copy failed
     */
    default boolean awaitLayer(int layer, Deadline deadline, WaitMode mode) throws InterruptedException {
        return await(layerDone(layer), deadline, mode);
    }

    /**
     * Waits for the whole copy until {@code deadline}.
     *
     * @return true when done, false when the deadline passed or was cancelled first
     * @throws HiCacheException when the copy failed
     */
    default boolean await(Deadline deadline) throws InterruptedException {
        return await(done(), deadline, WaitMode.PARK);
    }

    /**
     * Waits for the whole copy until {@code deadline}, parking or spinning as {@code mode} says.
     *
     * @return true when done, false when the deadline passed or was cancelled first
     * @throws HiCacheException when the copy failed
     */
    default boolean await(Deadline deadline, WaitMode mode) throws InterruptedException {
        return await(done(), deadline, mode);
    }

    private static boolean await(CompletableFuture<Void> future, Deadline deadline, WaitMode mode)
            throws InterruptedException {
        if (mode == WaitMode.SPIN) {
            while (!future.isDone()) {
                if (Thread.interrupted()) {
                    throw new InterruptedException();
                }
                if (deadline.isOver()) {
                    return false;
                }
                Thread.onSpinWait();
            }
        }
        try {
            future.get(deadline.remainingNanos(), TimeUnit.NANOSECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (ExecutionException e) {
            if (e.getCause() instanceof HiCacheException h) {
                throw h;
            }
            throw new HiCacheException(ErrorCode.COPY_FAILED, "copy failed: " + e.getCause(), e.getCause());
        }
    }
}
