package io.hicache.transfer.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The rank thread's view of its own queue, which a spinning task uses to yield; and the spin's configuration. */
class PdThreadTest {
    @Test
    void aTaskIsDueOnlyOncePostedOrItsTimeCame() throws Exception {
        try (PdThread thread = new PdThread("pd-thread-test")) {
            CountDownLatch running = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            thread.post(() -> {
                running.countDown();
                try {
                    release.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            assertTrue(running.await(10, TimeUnit.SECONDS));
            thread.every(60_000, () -> {}); // queued, not due for a minute
            assertFalse(thread.hasDueTask(), "a periodic task not yet due is not work to yield to");
            CountDownLatch ran = new CountDownLatch(1);
            thread.post(ran::countDown);
            assertTrue(thread.hasDueTask(), "a posted task is due at once");
            release.countDown();
            assertTrue(ran.await(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void theSpinIsBoundedAndDefaultsOn() {
        assertEquals(PdConfig.DEFAULT_WORKER_SPIN_MICROS, PdConfig.defaults().workerSpinMicros());
        assertEquals(0, spinning(0).workerSpinMicros());
        assertThrows(IllegalArgumentException.class, () -> spinning(-1));
        assertThrows(IllegalArgumentException.class, () -> spinning(100_001));
    }

    private static PdConfig spinning(long micros) {
        return new PdConfig(1_000, 1_000, 1_000, 1_000, 1, 1_000, 1_000, micros);
    }
}
