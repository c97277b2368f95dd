package io.hicache.core.cache;

import static io.hicache.core.cache.HiCacheTest.settings;
import static io.hicache.core.cache.TestEngine.concat;
import static io.hicache.core.cache.TestEngine.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Issue 19, part 3: after a restart the host tier comes back warm, and the cache serves it: a request whose prefix
 * misses the tree finds its pages among those the earlier run left, takes them in as host-only nodes and loads them
 * like any host hit, byte for byte.
 */
class WarmRestartTest {
    @Test
    void aRestartedCacheServesThePagesItsHostTierKept() throws Exception {
        Path dir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-warm");
        try {
            Map<String, String> s = settings("host.dir", dir.toString());
            int[] p = prompt(55_000, 64); // 16 pages
            try (TestEngine first = new TestEngine(s, 64, null)) {
                first.serve("first", p);
                first.quiesce();
                assertEquals(16, first.cache.stats().hostPages(), "write-through backed the prompt up");
            }
            try (TestEngine second = new TestEngine(s, 64, null)) {
                TestEngine.Served back = second.serve("back", p); // serve checks every loaded byte
                assertEquals(0, back.deviceTokens());
                assertEquals(64, back.hostTokens(), "the whole prompt from the warm host tier");
                assertEquals(64, back.loadedTokens());
                assertEquals(0, back.computedPages());
                assertEquals(16, second.cache.stats().hostAdoptedPages());
                second.quiesce();
                second.cache.core().checkConsistency();
            }
            try (TestEngine third = new TestEngine(s, 64, null)) {
                int[] half = concat(Arrays.copyOf(p, 32), prompt(77_000, 32));
                TestEngine.Served mixed = third.serve("half", half);
                assertEquals(32, mixed.hostTokens(), "the leading pages the host kept, up to the first it lacks");
                assertEquals(8, mixed.computedPages());
                assertEquals(8, third.cache.stats().hostAdoptedPages());
                TestEngine.Served other = third.serve("other", prompt(99_000, 64));
                assertEquals(0, other.hostTokens(), "a prompt the earlier runs never saw finds nothing");
                third.quiesce();
                third.cache.core().checkConsistency();
            }
        } finally {
            deleteTree(dir);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path f : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(f);
            }
        }
    }
}
