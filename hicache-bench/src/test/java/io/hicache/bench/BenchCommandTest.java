package io.hicache.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.cli.HiCacheCli;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The bench frame works end to end; figures are not judged here (benchmarks are not unit tests). */
class BenchCommandTest {
    @Test
    void keysSuiteWritesItsRows(@TempDir Path dir) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = HiCacheCli.fromClassPath()
                .run(
                        List.of("bench", "keys", "--quick", "--out", dir.toString()),
                        new PrintStream(out, true, StandardCharsets.UTF_8),
                        new PrintStream(err, true, StandardCharsets.UTF_8));
        String printed = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, printed + err.toString(StandardCharsets.UTF_8));
        assertTrue(printed.contains("page_hash_p64") && printed.contains("jdk_sha256_same_bytes"), printed);
        String json = Files.readString(dir.resolve("keys.json"));
        for (String field : List.of(
                "\"suite\": \"keys\"",
                "\"machine\"",
                "\"date\"",
                "\"command\"",
                "\"metric\"",
                "\"value\"",
                "\"unit\"",
                "\"reference\"",
                "\"reference_value\"",
                "\"ratio\"")) {
            assertTrue(json.contains(field), field + " missing from " + json);
        }
        assertEquals(2 * KeysSuite.PAGE_SIZES.length, json.split("\"metric\"").length - 1, json);
        assertTrue(json.contains("\"command\": \"hicache bench keys --quick --out "), "the command as typed: " + json);
    }

    @Test
    void forkedRunsComeBackAndMergeByMedian() throws Exception {
        ByteArrayOutputStream shown = new ByteArrayOutputStream();
        AtomicLong clock = new AtomicLong();
        Progress progress = new Progress(
                new PrintStream(shown, true, StandardCharsets.UTF_8),
                false,
                () -> clock.addAndGet(10_000_000_000L)); // ten seconds a call: every round gets its line
        List<BenchRow> rows = Forks.run("keys", true, 2, progress);
        assertEquals(2 * KeysSuite.PAGE_SIZES.length, rows.size(), rows::toString);
        String lines = shown.toString(StandardCharsets.UTF_8);
        assertTrue(lines.contains("bench keys: fork 1 of 2\n") && lines.contains("bench keys: fork 2 of 2\n"), lines);
        assertTrue(lines.contains(", measurement 1, round 1 of "), "the forks' rounds reach the parent: " + lines);
        assertTrue(
                rows.stream().allMatch(r -> r.value() > 0 && r.referenceValue() > 0 && r.ratio() > 0), rows::toString);

        BenchRow a =
                new BenchRow("m", 1, "u", "ref", 10, 0.1, "higher").withAim(0.7).withSpread(0.05, 0.3);
        BenchRow b = new BenchRow("m", 5, "u", "ref", 20, 0.5, "higher").withSpread(0.4, 0.9);
        BenchRow c = new BenchRow("m", 3, "u", "ref", 30, 0.2, "higher");
        BenchRow merged =
                Forks.median(List.of(List.of(a), List.of(b), List.of(c))).getFirst();
        assertEquals(3, merged.value());
        assertEquals(20, merged.referenceValue());
        assertEquals(0.2, merged.ratio(), "the ratio is the median of the forks' ratios");
        assertEquals(0.7, merged.aim(), "the aim survives the merge");
        assertEquals(0.05, merged.ratioMin(), "the spread is the lowest round of any fork");
        assertEquals(0.9, merged.ratioMax(), "and the highest");
    }

    @Test
    void rowsCrossFromForkToParentWithTheirAims() {
        BenchRow plain = new BenchRow("m", 1.5, "GB/s", "ref", 3, 0.5, "higher");
        BenchRow aimed = BenchRow.lowerIsBetter("t", 2, "ms", "ref", 4).withAim(0.25);
        assertEquals(plain, Forks.parse(Forks.format(plain)));
        assertEquals(aimed, Forks.parse(Forks.format(aimed)));
        assertNull(Forks.parse(Forks.format(plain)).aim());
        BenchRow spread = plain.withSpread(0.4, 0.7);
        assertEquals(spread, Forks.parse(Forks.format(spread)));
        assertNull(Forks.parse(Forks.format(plain)).ratioMin());
    }

    @Test
    void unknownSuitesAreUsageErrors() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = HiCacheCli.fromClassPath()
                .run(
                        List.of("bench", "nosuch"),
                        new PrintStream(new ByteArrayOutputStream()),
                        new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, status);
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("unknown suite 'nosuch'; suites: "));
    }
}
