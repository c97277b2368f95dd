package io.hicache.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.hicache.core.store.StoreConfig;
import io.hicache.testkit.ConformanceReport.Outcome;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** Proof that the kit has teeth: each broken store fails the cases aimed at its bug, and the reference passes. */
class KitCatchesBrokenStoresTest {
    private static Set<String> failed(ConformanceReport report) {
        return report.cases(Outcome.FAILED).stream()
                .map(c -> c.name().replaceFirst(" \\[.*", ""))
                .collect(Collectors.toSet());
    }

    @Test
    void theReferenceStorePassesEveryCaseItCanRun() {
        ConformanceReport report = ConfiguredStoreKit.run(StoreConfig.of("memory"), true);
        assertEquals(0, report.count(Outcome.FAILED), () -> print(report));
        assertTrue(report.count(Outcome.PASSED) >= 18, () -> print(report));
        // Only the cases for capabilities the memory store lacks may be skipped.
        Set<String> skipped = report.cases(Outcome.SKIPPED).stream()
                .map(ConformanceReport.Case::name)
                .collect(Collectors.toSet());
        assertEquals(
                Set.of(
                        "aPersistentStoreKeepsItsPagesAcrossReopen",
                        "aSharedStoreSeesAnotherInstancesPages",
                        "aCorruptedPageReadsAsAMissNeverAsWrongBytes",
                        "anEvictingStoreKeepsAcceptingPutsAndStaysUnderItsCapacity",
                        "anEvictingStoreTakesAChainsSuffixBeforeItsPrefix"),
                skipped,
                () -> print(report));
    }

    @Test
    void wrongBytesAreCaught() {
        ConformanceReport report = ConformanceRunner.run(BrokenStores.WrongBytesKit.class, "wrong-bytes");
        Set<String> failed = failed(report);
        assertTrue(
                failed.containsAll(List.of(
                        "roundTripAtPageSize",
                        "aBatchOf1024Pages",
                        "mixedBatchesGiveTheRightOutcomePerKey",
                        "eightThreadsPutAndGetOverlappingKeys")),
                () -> print(report));
        assertFalse(report.passed());
    }

    @Test
    void hitsCountedPastAGapAreCaught() {
        ConformanceReport report = ConformanceRunner.run(BrokenStores.GapCountingKit.class, "gap-counting");
        assertTrue(failed(report).contains("leadingHitsStopAtTheFirstMiss"), () -> print(report));
        assertFalse(report.passed());
    }

    @Test
    void aStoreThatEvictsAPrefixBeforeItsSuffixIsCaught() {
        ConformanceReport report =
                ConformanceRunner.run(BrokenStores.PrefixFirstEvictingKit.class, "prefix-first-evicting");
        assertTrue(failed(report).contains("anEvictingStoreTakesAChainsSuffixBeforeItsPrefix"), () -> print(report));
        assertFalse(report.passed());
    }

    @Test
    void namespaceLeaksAreCaught() {
        ConformanceReport report = ConformanceRunner.run(BrokenStores.NamespaceLeakingKit.class, "namespace-leaking");
        assertTrue(failed(report).contains("namespacesAreIsolated"), () -> print(report));
        assertFalse(report.passed());
    }

    @Test
    void theReportPrintsATable() {
        ConformanceReport report = ConformanceRunner.run(BrokenStores.GapCountingKit.class, "gap-counting");
        String table = print(report);
        assertTrue(table.contains("leadingHitsStopAtTheFirstMiss") && table.contains("failed"), table);
        assertTrue(table.contains("roundTripAtPageSize [4096 bytes]"), table);
        assertTrue(table.lines().anyMatch(l -> l.matches("\\d+ passed, [1-9]\\d* failed, \\d+ skipped")), table);
    }

    private static String print(ConformanceReport report) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        report.print(new PrintStream(out, true, StandardCharsets.UTF_8));
        return out.toString(StandardCharsets.UTF_8);
    }
}
