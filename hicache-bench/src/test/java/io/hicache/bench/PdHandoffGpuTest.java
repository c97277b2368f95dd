package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The GPU PD handoff experiment, run small on the emulated device, so that a GPU run does not find its bugs. */
class PdHandoffGpuTest {
    @Test
    void everyHandoffArrivesWholeAndEveryRowIsWritten() throws Exception {
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        List<BenchRow> rows;
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 2);
                PrintStream p = new PrintStream(log, true, StandardCharsets.UTF_8)) {
            rows = PdHandoffGpu.run(
                    runtime,
                    KvGeometry.mha(4, 2, 64, KvDtype.BFLOAT16),
                    List.of(new PdHandoffGpu.Size("4k", 256), new PdHandoffGpu.Size("32k", 1024)),
                    2,
                    p,
                    new ArrayList<>());
        }
        String text = log.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("pd shm 32k (64 pages"), text);
        assertTrue(text.contains("pd tcp 4k (16 pages"), text);
        for (String name : List.of(
                "pd_handoff_4k_ms",
                "pd_handoff_32k_ms",
                "pd_handoff_4k_ms_tcp",
                "pd_handoff_32k_ms_tcp",
                "pd_first_layer_32k_ms",
                "pd_stage_wire_4k_tcp_gbps",
                "pd_rank_handoff_4k_ms",
                "pd_rank_handoff_32k_ms_tcp")) {
            BenchRow row = rows.stream()
                    .filter(r -> r.metric().equals(name))
                    .findFirst()
                    .orElseThrow(() -> new AssertionError("no row " + name + " in " + rows));
            assertTrue(row.value() > 0 && row.referenceValue() > 0, row::toString);
        }
        for (BenchRow row : rows) {
            if (row.metric().startsWith("pd_pages_with_wrong_bytes_")
                    || row.metric().startsWith("pd_rank_pages_with")) {
                assertEquals(0, row.value(), row::toString);
                assertTrue(row.referenceValue() == 16 || row.referenceValue() == 64, row::toString);
            }
        }
        assertEquals(
                4,
                rows.stream()
                        .filter(r -> r.metric().startsWith("pd_pages_with_wrong_bytes_"))
                        .count());
        assertEquals(
                4,
                rows.stream()
                        .filter(r -> r.metric().startsWith("pd_rank_pages_with_wrong_bytes_"))
                        .count());
        assertTrue(text.contains("pd ranks tcp 32k"), text);
    }
}
