package io.hicache.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The module's promise that nothing waits unbounded, checked on its sources: none of the blocking calls that take no
 * timeout appears in main code (Netty's {@code sync()} and argument-less {@code await()}, {@code join()},
 * {@code take()}, {@code wait()}, {@code waitFor()}, {@code acquire()} of semaphores, {@code Future.get()} on a
 * future). Waits with a timeout ({@code await(Duration)}, {@code get(n, unit)}) are what the code uses instead.
 */
class NoUnboundedWaitsTest {
    private static final Pattern UNBOUNDED =
            Pattern.compile("\\.(sync|syncUninterruptibly|await|awaitUninterruptibly|join|take|wait|waitFor)\\(\\)"
                    + "|[Ff]uture\\w*\\)?\\.get\\(\\)|semaphore\\w*\\.acquire\\(\\)");

    @Test
    void noBlockingCallWithoutATimeout() throws IOException {
        Path main = Path.of("src/main/java");
        List<String> found = new ArrayList<>();
        int files = 0;
        try (Stream<Path> all = Files.walk(main)) {
            for (Path p : all.filter(f -> f.toString().endsWith(".java")).toList()) {
                files++;
                List<String> lines = Files.readAllLines(p);
                for (int i = 0; i < lines.size(); i++) {
                    if (UNBOUNDED.matcher(lines.get(i)).find()) {
                        found.add(p + ":" + (i + 1) + ": " + lines.get(i).trim());
                    }
                }
            }
        }
        assertTrue(files > 20, "the scan saw the module's sources (" + files + " files)");
        assertEquals(List.of(), found, "unbounded waits");
    }

    @Test
    void theScanCatchesWhatItLooksFor() {
        for (String bad : List.of(
                "f.sync();",
                "latch.await();",
                "t.join();",
                "q.take();",
                "p.waitFor();",
                "future.get();",
                "bind(h, p).syncUninterruptibly().channel()")) {
            assertTrue(UNBOUNDED.matcher(bad).find(), bad);
        }
        for (String ok : List.of("latch.await(5, SECONDS);", "counter.get();", "future.get(1, SECONDS);")) {
            assertTrue(!UNBOUNDED.matcher(ok).find(), ok);
        }
    }
}
