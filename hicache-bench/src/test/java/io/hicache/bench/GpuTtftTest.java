package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.memory.emulated.EmulatedDeviceRuntime;
import io.hicache.core.page.KvDtype;
import io.hicache.core.page.KvGeometry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The time-to-first-token experiment run small on the emulated device, so that a GPU run does not find its bugs: every
 * tier restores the prompt's pages byte for byte, and the cost-aware prefetch restores over the file store and
 * recomputes over a store slower than the (given) prefill.
 */
class GpuTtftTest {
    @Test
    void everyTierRestoresThePromptAndThePolicyRecomputesOverASlowStore(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("ttft_python.json");
        // 1,024 tokens of a tiny geometry (64 pages of 1 KiB): a prefill of 150 ms is about twice as fast as the slow
        // store (4 ms per page late: 310 ms measured) and about twice as slow as the file store (47-66 ms measured on
        // a loaded 2-core CI machine, where a prefill of 50 ms once lost to it and the policy rightly recomputed).
        Files.writeString(json, """
                {"device": "test", "prefill_ms": {"1024": 150.0}, "daemon_local_ms": {"1024": 5.0},
                 "daemon_tcp_ms": {"1024": 9.0}, "verified": true}
                """);
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        List<BenchRow> rows;
        try (EmulatedDeviceRuntime runtime = new EmulatedDeviceRuntime(256L << 20, 2);
                PrintStream p = new PrintStream(log, true, StandardCharsets.UTF_8)) {
            rows = GpuTtft.run(
                    runtime,
                    KvGeometry.mha(2, 1, 8, KvDtype.BFLOAT16),
                    new int[] {1024},
                    2,
                    GpuTtft.PythonResults.read(json),
                    p);
        }
        String text = log.toString(StandardCharsets.UTF_8);
        Map<String, BenchRow> byName = rows.stream().collect(Collectors.toMap(BenchRow::metric, r -> r));
        for (String name : List.of(
                "ttft_restore_device_1k",
                "ttft_restore_host_1k",
                "ttft_restore_l3_1k",
                "ttft_restore_slow_l3_1k",
                "ttft_choice_l3_1k",
                "ttft_choice_slow_l3_1k",
                "ttft_restore_daemon_1k",
                "ttft_restore_daemon_tcp_1k")) {
            assertTrue(byName.containsKey(name), name + " missing; rows " + byName.keySet() + "\n" + text);
        }
        assertEquals(0, byName.get("ttft_restore_pages_with_wrong_bytes_1k").value(), text);
        assertEquals(150.0, byName.get("ttft_restore_host_1k").referenceValue(), "prefill is every row's reference");
        assertTrue(text.contains("file l3: first restore") && text.contains("restored"), text);
        assertTrue(
                text.contains("slow l3 (4000 us per page late): first restore") && text.contains("chose to recompute"),
                text);
        assertTrue(byName.get("ttft_restore_slow_l3_1k").value() > 150.0, "the slow store loses to prefill: " + text);
    }
}
