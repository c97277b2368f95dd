package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.memory.WaitMode;
import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GPU replay's load diagnosis on the emulated device: a replay through a {@link LoadTracer} stamps each load's
 * phases in order (none negative: a stamp is taken before the future it follows completes, which a first version got
 * wrong), from the same load the replay waited for (together they span its wait), and a spinning wait sees every
 * load end.
 */
class LoadTracerTest {
    @TempDir
    Path dir;

    @Test
    void tracedPhasesAddUpToTheLoadBacksWait() throws Exception {
        List<int[]> workload = ReplaySuite.workload(6, 3);
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 2)) {
            ReplaySuite.LoadTimer loads = new ReplaySuite.LoadTimer();
            loads.waitMode = WaitMode.SPIN;
            loads.tracer = new LoadTracer(runtime);
            Path host = Files.createDirectory(dir.resolve("host"));
            ReplaySuite.Tally t = ReplaySuite.replayOn(
                    runtime,
                    KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16),
                    ReplaySuite.settings(host, "all"),
                    workload,
                    ReplaySuite.devicePages(6, 3),
                    null,
                    -1,
                    0,
                    loads);
            assertEquals(0, t.failed(), "failed turns");
            assertTrue(loads.count > 0, "some turns loaded pages back: " + t);
            long sum = 0;
            for (int i = 0; i < loads.phases.length; i++) {
                assertTrue(loads.phases[i] >= 0, "phase " + i + " is not negative: " + loads.phases());
                sum += loads.phases[i];
            }
            assertEquals(loads.nanos, sum, "the phases add up to the load-backs' wait");
            assertTrue(loads.withBackups <= loads.count, loads.phases());
            assertTrue(loads.phases().contains(loads.count + " load-backs, spin wait"), loads.phases());
        }
    }
}
