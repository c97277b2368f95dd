package io.hicache.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import io.hicache.core.ErrorCode;
import io.hicache.core.HiCacheException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The waits {@link KvCopy} offers, in both modes, over {@link LayerSignals}. */
class KvCopyWaitTest {

    @ParameterizedTest
    @EnumSource(WaitMode.class)
    void aWaitReturnsOnceItsLayerLandsAndNotBefore(WaitMode mode) throws Exception {
        LayerSignals signals = new LayerSignals(3);
        CompletableFuture<Boolean> layerOne = CompletableFuture.supplyAsync(() -> {
            try {
                return signals.awaitLayer(1, Deadline.after(Duration.ofSeconds(30)), mode);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        signals.landed(1);
        Thread.sleep(50);
        assertFalse(layerOne.isDone(), "layer 1 completes only after layer 0");
        signals.landed(0);
        assertTrue(layerOne.get(30, TimeUnit.SECONDS));
        assertFalse(signals.await(Deadline.afterNanos(1_000_000), mode), "layer 2 has not landed");
        signals.landed(2);
        assertTrue(signals.await(Deadline.expired(), mode), "a finished copy is done whatever the deadline");
    }

    @ParameterizedTest
    @EnumSource(WaitMode.class)
    void aWaitPastItsDeadlineReturnsFalse(WaitMode mode) throws Exception {
        LayerSignals signals = new LayerSignals(2);
        long start = System.nanoTime();
        assertFalse(signals.await(Deadline.after(Duration.ofMillis(20)), mode));
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(20), "returned before the deadline");
        Deadline cancelled = Deadline.after(Duration.ofMinutes(1));
        cancelled.cancel();
        if (mode == WaitMode.SPIN) {
            // A spinning wait watches the deadline as it goes; a parked one sleeps until the time runs out.
            assertFalse(signals.awaitLayer(0, cancelled, mode));
        }
    }

    @ParameterizedTest
    @EnumSource(WaitMode.class)
    void aFailedCopyFailsTheWait(WaitMode mode) {
        LayerSignals signals = new LayerSignals(2);
        signals.landed(0);
        signals.fail("load of layer 1", new IllegalStateException("kernel fault"));
        HiCacheException e =
                assertThrows(HiCacheException.class, () -> signals.await(Deadline.after(Duration.ofSeconds(5)), mode));
        assertEquals(ErrorCode.COPY_FAILED, e.code());
        assertTrue(e.getMessage().contains("kernel fault"), e.getMessage());
    }

    @ParameterizedTest
    @EnumSource(WaitMode.class)
    void anInterruptedWaiterStops(WaitMode mode) throws Exception {
        LayerSignals signals = new LayerSignals(1);
        CompletableFuture<Throwable> outcome = new CompletableFuture<>();
        Thread waiter = Thread.ofPlatform().start(() -> {
            try {
                signals.await(Deadline.after(Duration.ofMinutes(1)), mode);
                outcome.complete(null);
            } catch (Throwable t) {
                outcome.complete(t);
            }
        });
        Thread.sleep(20);
        waiter.interrupt();
        assertTrue(outcome.get(30, TimeUnit.SECONDS) instanceof InterruptedException, "the wait was not interrupted");
    }
}
