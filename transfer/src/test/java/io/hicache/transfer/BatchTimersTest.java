package io.hicache.transfer;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.Deadline;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A batch's deadline timers leave the engine's timer queue when the batch finishes: left until their deadline, each
 * held the batch with its requests and slices, so a steady flow of batches kept every one of the last deadline's worth
 * (30 s by default) alive.
 */
class BatchTimersTest {
    @Test
    void finishedBatchesLeaveNoTimersBehind() throws Exception {
        try (Arena arena = Arena.ofShared();
                TransferEngine local = TransferEngine.open(
                        TransferConfig.defaults("timers-local").withTransports(List.of("tcp")));
                TransferEngine remote = TransferEngine.open(
                        TransferConfig.defaults("timers-remote").withTransports(List.of("tcp")))) {
            MemorySegment source = arena.allocate(1 << 16, 4096);
            local.register("src", source);
            remote.register("dst", arena.allocate(1 << 16, 4096));
            RemoteSegment segment = local.openSegment(remote.address(), Duration.ofSeconds(10));
            int before = local.queuedTimers();
            int batches = 50;
            for (int i = 0; i < batches; i++) {
                TransferBatch batch = local.submit(
                        segment,
                        List.of(TransferRequest.write(source.asSlice(0, 4096), "dst", 4096L * (i % 16))),
                        Deadline.after(Duration.ofSeconds(30)));
                assertTrue(batch.await(Duration.ofSeconds(10)), "batch " + i + " finished");
                assertTrue(batch.allDone(), "batch " + i + ": " + batch.firstFailure());
            }
            // Cancelled on completion, from the thread that completes the batch: give it a moment.
            long until = System.nanoTime() + 5_000_000_000L;
            while (local.queuedTimers() > before + 1 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            int after = local.queuedTimers();
            // Each batch scheduled two timers (its deadline and a last resort); none may stay. A heartbeat running when
            // either count is taken is out of the queue for that moment: one either way is the links', not the
            // batches'.
            assertTrue(
                    after <= before + 1, before + " timers queued before " + batches + " batches, " + after + " after");
        }
    }
}
