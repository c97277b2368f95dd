package io.hicache.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HiCacheCliTest {
    record Run(int status, String out, String err) {}

    static Run run(String... args) {
        return runWith(Map.of(), args);
    }

    /** Runs with {@code env} as the environment (no HICACHE_* variable of this JVM's leaks into the run). */
    static Run runWith(Map<String, String> env, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = HiCacheCli.fromClassPath()
                .run(
                        List.of(args),
                        new PrintStream(out, true, StandardCharsets.UTF_8),
                        new PrintStream(err, true, StandardCharsets.UTF_8),
                        env);
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void helpListsTheCommands() {
        Run help = run("--help");
        assertEquals(0, help.status());
        assertTrue(help.out().contains("version") && help.out().contains("conformance"), help.out());
        Run commandHelp = run("conformance", "--help");
        assertEquals(0, commandHelp.status());
        assertTrue(commandHelp.out().contains("--memory.capacity=BYTES"), commandHelp.out());
    }

    @Test
    void badArgumentsPrintUsageAndExit2() {
        Run none = run();
        assertEquals(2, none.status());
        assertTrue(none.err().contains("Usage: hicache"), none.err());
        Run unknown = run("frobnicate");
        assertEquals(2, unknown.status());
        assertTrue(unknown.err().contains("unknown command 'frobnicate'"), unknown.err());
        Run missingStore = run("conformance");
        assertEquals(2, missingStore.status());
        assertTrue(missingStore.err().contains("Missing required option: '--store=NAME'"), missingStore.err());
        Run badOption = run("version", "--verbose");
        assertEquals(2, badOption.status());
        assertTrue(badOption.err().contains("Unknown option: '--verbose'"), badOption.err());
    }

    @Test
    void versionNamesTheRuntime() {
        Run version = run("version");
        assertEquals(0, version.status());
        assertTrue(version.out().startsWith("hicache "), version.out());
        assertTrue(version.out().contains("java " + Runtime.version().feature()), version.out());
    }

    @Test
    void conformanceOfTheMemoryStorePasses() {
        Run kit = run("conformance", "--store", "memory", "--memory.capacity", "512MiB");
        assertEquals(0, kit.status(), kit.out() + kit.err());
        assertTrue(kit.out().contains("conformance of page store 'memory'"), kit.out());
        assertTrue(
                kit.out().lines().anyMatch(l -> l.matches("roundTripAtPageSize \\[2097152 bytes\\] +passed .*")),
                kit.out());
        assertTrue(kit.out().contains("clearAllRemovesEverything"), kit.out());
        assertTrue(kit.out().lines().anyMatch(l -> l.matches("\\d+ passed, 0 failed, \\d+ skipped")), kit.out());
        assertTrue(
                kit.out().contains("clearing the whole store was not allowed"), "clear-all is skipped unless allowed");
    }

    @Test
    void configurationMistakesFailClearly(@TempDir Path dir) throws IOException {
        Run unknownStore = run("conformance", "--store", "nosuch");
        assertEquals(1, unknownStore.status());
        assertTrue(unknownStore.err().contains("no page store is named 'nosuch'; available: "), unknownStore.err());
        Path config = dir.resolve("kit.properties");
        Files.writeString(config, "memory.capasity = 1GiB\n");
        Run typo = run("conformance", "--store", "memory", "--config", config.toString());
        assertEquals(1, typo.status());
        assertTrue(typo.err().contains("did you mean 'memory.capacity'?"), typo.err());
        Run badValue = run("conformance", "--store", "memory", "--memory.capacity", "0");
        assertEquals(1, badValue.status());
        assertTrue(badValue.err().contains("'memory.capacity' must be at least 1 byte"), badValue.err());
    }
}
