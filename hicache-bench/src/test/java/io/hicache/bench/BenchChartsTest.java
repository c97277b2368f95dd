package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.cli.HiCacheCli;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code hicache bench report} draws a PNG per result file, with a panel per direction of "better". */
class BenchChartsTest {
    private static final byte[] PNG_SIGNATURE = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    private static final int BETTER = RatioChart.BETTER.getRGB() & 0xFFFFFF;
    private static final int WORSE = RatioChart.WORSE.getRGB() & 0xFFFFFF;
    private static final int AIM = RatioMarks.AIM.getRGB() & 0xFFFFFF;

    private static void write(Path dir, String suite, List<BenchRow> rows) throws IOException {
        new BenchReport(suite, rows, Map.of("cores", 2), Instant.parse("2026-11-23T00:00:00Z"), "test", 0).write(dir);
    }

    @Test
    void theReportCommandDrawsAChartPerResultFile(@TempDir Path dir) throws IOException {
        Path results = Files.createDirectories(dir.resolve("results"));
        Path charts = dir.resolve("charts");
        write(
                results,
                "mixed",
                List.of(
                        BenchRow.higherIsBetter("python_tcp_get_1m", 1.2, "GB/s", "java_remote_get", 1.5)
                                .withAim(0.7),
                        BenchRow.higherIsBetter("python_local_get_1m", 4.0, "GB/s", "python_tcp_get", 1.2),
                        BenchRow.lowerIsBetter("get_p99_64k", 300, "us", "redis_get_p99_64k", 100)));
        write(
                results,
                "fast",
                List.of(
                        BenchRow.higherIsBetter(
                                "kernel_vs_copy_engine_h2d_16k_page_first_direct",
                                448,
                                "GB/s",
                                "per_page_cumemcpy2dasync",
                                1),
                        new BenchRow("failed_requests", 0, "requests", "requests_run", 1152, 0, "higher")));
        Files.writeString(results.resolve("gpu_roundtrip.json"), "{\"device\": \"H100\", \"results\": []}");

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = HiCacheCli.fromClassPath()
                .run(
                        List.of("bench", "report", "--results", results.toString(), "--out", charts.toString()),
                        new PrintStream(out, true, StandardCharsets.UTF_8),
                        new PrintStream(err, true, StandardCharsets.UTF_8));
        String printed = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, printed + err.toString(StandardCharsets.UTF_8));
        assertTrue(printed.contains("skipped ") && printed.contains("gpu_roundtrip.json"), printed);
        assertTrue(printed.contains("2 charts"), printed);

        // Two higher-is-better rows, then one lower-is-better row: two panels of 140 pixels plus 24 a row.
        BufferedImage mixed = readPng(charts.resolve("mixed.png"));
        assertEquals(1000, mixed.getWidth());
        assertEquals(188 + 164, mixed.getHeight());
        assertTrue(pixels(mixed, 0, 188, WORSE) > 200, "the upper panel's 0.8 is worse than its reference");
        assertTrue(pixels(mixed, 0, 188, BETTER) > 200, "the upper panel's 3.33 is better than its reference");
        assertTrue(pixels(mixed, 188, 352, WORSE) > 200, "the lower panel's 3 is worse: lower is better there");
        assertEquals(0, pixels(mixed, 188, 352, BETTER), "nothing better than its reference in the lower panel");

        BufferedImage fast = readPng(charts.resolve("fast.png"));
        assertEquals(1000, fast.getWidth());
        assertEquals(140 + 4 * 24, fast.getHeight(), "labels too long to name their references: a heading for each");
        assertEquals(0, pixels(fast, 0, fast.getHeight(), AIM), "no aims recorded, none drawn");
        assertTrue(pixels(mixed, 0, 188, AIM) > 20, "the recorded aim is drawn");
    }

    @Test
    void theReportNeedsAResultsFolder(@TempDir Path dir) {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = HiCacheCli.fromClassPath()
                .run(
                        List.of(
                                "bench",
                                "report",
                                "--results",
                                dir.resolve("none").toString()),
                        new PrintStream(new ByteArrayOutputStream()),
                        new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, status);
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("no results folder"), err::toString);
    }

    private static BufferedImage readPng(Path file) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        assertTrue(bytes.length > 1000, file + " has " + bytes.length + " bytes");
        assertArrayEquals(PNG_SIGNATURE, Arrays.copyOf(bytes, PNG_SIGNATURE.length), file + " is not a PNG");
        BufferedImage image = ImageIO.read(file.toFile());
        assertNotNull(image, file + " does not decode");
        return image;
    }

    /** How many pixels of rows [from, to) have exactly {@code rgb}. */
    private static int pixels(BufferedImage image, int from, int to, int rgb) {
        int n = 0;
        for (int y = from; y < to; y++) {
            for (int x = 0; x < image.getWidth(); x++) {
                n += (image.getRGB(x, y) & 0xFFFFFF) == rgb ? 1 : 0;
            }
        }
        return n;
    }
}
