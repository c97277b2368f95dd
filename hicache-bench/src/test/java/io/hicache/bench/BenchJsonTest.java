package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The result files through Jackson: the shape they have always had, written and read back. */
class BenchJsonTest {
    private static final Path RESULTS = Path.of("..", "bench-results");

    private static BenchReport report(List<BenchRow> rows) {
        return new BenchReport(
                "demo",
                rows,
                Map.of("os", "Linux 6", "cores", 2, "cpu", "AMD \"EPYC\"\n"),
                Instant.parse("2026-11-23T08:51:28Z"),
                "./hicache bench demo --out 'a b'",
                3);
    }

    @Test
    void aReportIsWrittenInTheShapeOfTheCommittedFiles() throws IOException {
        String json = BenchJson.write(report(List.of(new BenchRow(
                "touch_ops_10m",
                1_388_712.4,
                "touches/s",
                "concurrent_hash_map_get_put_same_keys",
                0.06444912,
                16_112_279.4,
                "higher"))));
        assertEquals("""
                {
                  "suite": "demo",
                  "date": "2026-11-23T08:51:28Z",
                  "command": "./hicache bench demo --out 'a b'",
                  "forks": 3,
                  "machine": {
                    "cores": 2,
                    "cpu": "AMD \\"EPYC\\"\\n",
                    "os": "Linux 6"
                  },
                  "rows": [
                    {
                      "metric": "touch_ops_10m",
                      "value": 1388710,
                      "unit": "touches/s",
                      "reference": "concurrent_hash_map_get_put_same_keys",
                      "reference_value": 0.0644491,
                      "ratio": 16112300,
                      "better": "higher"
                    }
                  ]
                }
                """, json);
    }

    @Test
    void aReportComesBackAsItWasWritten() throws IOException {
        BenchReport written = report(List.of(
                new BenchRow("a", 1.5, "GB/s", "ref_a", 3, 0.5, "higher").withSpread(0.25, 0.75),
                BenchRow.lowerIsBetter("b_p99", 120, "us", "ref_b", 40).withAim(2),
                new BenchRow("c", Double.NaN, "ms", "ref_c", 0, Double.NaN, "lower")));
        String json = BenchJson.write(written);
        assertTrue(json.contains("\"aim\": 2"), json);
        assertTrue(json.contains("\"ratio_min\": 0.25") && json.contains("\"ratio_max\": 0.75"), json);
        assertTrue(json.contains("\"value\": null"), "NaN is written as null: " + json);
        BenchReport read = BenchJson.read(json);
        assertEquals(written, read);
        assertTrue(Double.isNaN(read.rows().get(2).value()), "null reads back as NaN, not 0");
        assertEquals(json, BenchJson.write(read));
    }

    /** Results written by Python scripts on the GPU machine (clients/python/interop), not by a bench suite. */
    private static final Set<String> PYTHON_SCRIPTS_RESULTS = Set.of(
            "gpu_roundtrip.json",
            "gpu_hybrid.json",
            "gpu_hybrid_before_3ae6f48.json",
            "gpu_transformer.json",
            "gpu_vllm.json");

    @Test
    void everyCommittedResultReadsBackAndIsWrittenAgainUnchanged() throws IOException {
        List<Path> files;
        try (Stream<Path> listing = Files.list(RESULTS)) {
            files = listing.filter(f -> f.toString().endsWith(".json")).sorted().toList();
        }
        int reports = 0;
        for (Path file : files) {
            Optional<BenchReport> report = BenchJson.readIfReport(file);
            if (PYTHON_SCRIPTS_RESULTS.contains(file.getFileName().toString())) {
                assertFalse(report.isPresent(), file + " is a Python script's, not a bench report");
                continue;
            }
            assertTrue(report.isPresent(), file::toString);
            assertFalse(report.get().rows().isEmpty(), file::toString);
            assertEquals(Files.readString(file), BenchJson.write(report.get()), file.toString());
            reports++;
        }
        assertTrue(reports >= 10, "committed reports found: " + reports);
    }

    @Test
    void aFileOfAnotherShapeIsNotAReport(@TempDir Path dir) throws IOException {
        Path other = Files.writeString(dir.resolve("other.json"), "{\"device\": \"H100\", \"results\": []}");
        assertTrue(BenchJson.readIfReport(other).isEmpty());
        Path broken = Files.writeString(dir.resolve("broken.json"), "{\"suite\": ");
        assertThrows(IOException.class, () -> BenchJson.readIfReport(broken));
    }

    @Test
    void iperfOutputIsReadThroughJackson() throws IOException {
        String iperf = """
                {"start": {"connected": [{"socket": 5}]},
                 "intervals": [{"sum": {"bits_per_second": 1.0e9}}],
                 "end": {"sum_sent": {"bits_per_second": 8.8e10},
                         "sum_received": {"bytes": 10, "bits_per_second": 8.0e10}}}
                """;
        assertEquals(1.0e10, TransferSuite.iperfBytesPerSecond(iperf));
        assertThrows(IOException.class, () -> TransferSuite.iperfBytesPerSecond("{\"error\": \"unable to connect\"}"));
    }
}
