package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Compiles the examples in docs/embedding.md and the README, runs them, and checks what they say. */
class EmbeddingDocTest {
    @TempDir
    Path dir;

    @Test
    void theExampleInTheDocsCompilesAndRuns() throws Exception {
        List<String> lines = compileAndRun(Path.of("..", "docs", "embedding.md"), "EmbeddingExample");
        assertTrue(
                lines.contains("turn-1: 0 of 200 prompt tokens came from the cache (0 from the device)"),
                lines::toString);
        assertTrue(
                lines.contains("turn-2: 256 of 456 prompt tokens came from the cache (256 from the device)"),
                lines::toString);
        assertTrue(lines.contains("KV pool: 4 layers, 256 pages of 16 tokens, rows of 256 bytes"), lines::toString);
        assertTrue(lines.contains("flushed: 32 device pages, 32 host pages"), lines::toString);
    }

    @Test
    void theTensorParallelExampleCompilesAndItsRanksAgree() throws Exception {
        List<String> lines = compileAndRun(Path.of("..", "docs", "embedding.md"), "TensorParallelExample");
        String turns = " turn 1: 0 cached, new pages from 0; turn 2: 288 cached, new pages from 18; turn 3: 592 cached,"
                + " new pages from 37; idle true";
        assertEquals(List.of("rank 0:" + turns, "rank 1:" + turns), lines);
    }

    @Test
    void theReadmeQuickStartCompilesAndRuns() throws Exception {
        List<String> lines = compileAndRun(Path.of("..", "README.md"));
        assertTrue(lines.contains("cached tokens: 64"), lines::toString);
    }

    /** The first java block of {@code docPath}, compiled and run with a host folder as its argument; what it printed. */
    private List<String> compileAndRun(Path docPath) throws Exception {
        return compileAndRun(docPath, null);
    }

    /** As above, for the java block that declares public class {@code className} (null: the first block). */
    private List<String> compileAndRun(Path docPath, String className) throws Exception {
        String doc = Files.readString(docPath);
        Matcher block = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(doc);
        do {
            assertTrue(block.find(), docPath + " has no java block declaring " + className);
        } while (className != null && !block.group(1).contains("public class " + className + " "));
        String source = block.group(1);
        Matcher name = Pattern.compile("public class (\\w+)").matcher(source);
        assertTrue(name.find(), "the example declares no public class");
        Path file = dir.resolve(name.group(1) + ".java");
        Files.writeString(file, source);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream errors = new ByteArrayOutputStream();
        int status = javac.run(
                null,
                null,
                errors,
                "-d",
                dir.toString(),
                "-classpath",
                System.getProperty("java.class.path"),
                file.toString());
        assertEquals(0, status, () -> "the example does not compile:\n" + errors.toString(StandardCharsets.UTF_8));

        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : dir, "hicache-doc");
        PrintStream out = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try (URLClassLoader loader =
                new URLClassLoader(new URL[] {dir.toUri().toURL()}, getClass().getClassLoader())) {
            Method main = loader.loadClass(name.group(1)).getMethod("main", String[].class);
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            main.invoke(null, (Object) new String[] {hostDir.toString()});
        } finally {
            System.setOut(out);
            try (Stream<Path> all = Files.walk(hostDir)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
        return printed.toString(StandardCharsets.UTF_8).lines().toList();
    }
}
