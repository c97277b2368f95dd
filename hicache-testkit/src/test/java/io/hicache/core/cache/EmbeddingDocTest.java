package io.hicache.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
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

    /**
     * The README's QuickStart, compiled, then run by the README's own {@code java} line in a JVM of its own: no flag
     * but those the line has (issue 37: it once needed seven that no document named). It leaves nothing in /dev/shm.
     */
    @Test
    void theReadmeQuickStartRunsAsWrittenAndCleansUp() throws Exception {
        Path shm = Path.of("/dev/shm");
        assumeTrue(Files.isDirectory(shm), "the QuickStart puts its host tier in /dev/shm");
        Path folder = shm.resolve("hicache-quickstart");
        assumeFalse(Files.exists(folder), folder + " exists already (another run, or one told --keep)");
        compile(Path.of("..", "README.md"), "QuickStart");
        Run run = runReadmeLine(List.of());
        assertEquals(0, run.status(), run::output);
        assertTrue(run.output().lines().anyMatch("cached tokens: 64"::equals), run::output);
        assertFalse(run.output().contains("Exception"), run::output);
        assertFalse(Files.exists(folder), () -> "the QuickStart left " + folder + " behind");
    }

    /** Without the flags, the QuickStart fails with one message naming each one it lacks, not deep in Chronicle. */
    @Test
    void withoutTheFlagsTheErrorNamesThem() throws Exception {
        assumeTrue(Files.isDirectory(Path.of("/dev/shm")), "the QuickStart puts its host tier in /dev/shm");
        compile(Path.of("..", "README.md"), "QuickStart");
        Run run = run(List.of(
                javaBinary(), "-cp", System.getProperty("java.class.path") + File.pathSeparator + dir, "QuickStart"));
        assertNotEquals(0, run.status(), run::output);
        for (String flag : List.of(
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
                "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED")) {
            assertTrue(run.output().contains(flag), () -> "the error does not name " + flag + ":\n" + run.output());
        }
        assertFalse(run.output().contains("InaccessibleObjectException"), run::output);
    }

    private record Run(int status, String output) {}

    /**
     * The {@code java} line of the README's shell block marked {@code docs-check: run QuickStart.java}, with
     * {@code $CP} this test's class path and {@code java} this JDK's, run in the folder the example was compiled to.
     */
    private Run runReadmeLine(List<String> extraArgs) throws Exception {
        String readme = Files.readString(Path.of("..", "README.md"));
        int marker = readme.indexOf("<!-- docs-check: run QuickStart.java -->");
        assertTrue(marker >= 0, "the README has no block marked for this test");
        Matcher block = Pattern.compile("```sh\\n(.*?)```", Pattern.DOTALL).matcher(readme);
        assertTrue(block.find(marker), "no shell block after the marker");
        String line = block.group(1)
                .lines()
                .filter(l -> l.startsWith("java "))
                .findFirst()
                .orElseThrow(() -> new AssertionError("the block has no java line: " + block.group(1)));
        String classPath = System.getProperty("java.class.path");
        List<String> command = new ArrayList<>();
        for (String word : line.trim().split("\\s+")) {
            command.add(word.replace("\"", "").replace("$CP", classPath));
        }
        command.set(0, javaBinary());
        command.addAll(extraArgs);
        return run(command);
    }

    private Run run(List<String> command) throws Exception {
        // Chronicle Map keeps scratch files in <working directory>/target, or else in <java.io.tmpdir>/target, which
        // would outlive the test: give it the first, inside the folder the test deletes.
        Files.createDirectories(dir.resolve("target"));
        ProcessBuilder builder =
                new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true);
        // Nothing but the command line: no options slipped in through the environment.
        builder.environment().remove("JDK_JAVA_OPTIONS");
        builder.environment().remove("JAVA_TOOL_OPTIONS");
        Process process = builder.start();
        byte[] output = process.getInputStream().readAllBytes();
        assertTrue(process.waitFor(120, TimeUnit.SECONDS), "the QuickStart did not end");
        return new Run(process.exitValue(), new String(output, StandardCharsets.UTF_8));
    }

    private static String javaBinary() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    /**
     * The java block of {@code docPath} that declares public class {@code className}, compiled and run in this JVM
     * with a host folder as its argument; what it printed.
     */
    private List<String> compileAndRun(Path docPath, String className) throws Exception {
        String mainClass = compile(docPath, className);
        return runInThisJvm(mainClass);
    }

    /** Compiles the java block of {@code docPath} that declares {@code className} (null: the first) into the folder. */
    private String compile(Path docPath, String className) throws Exception {
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
        return name.group(1);
    }

    /** Runs {@code mainClass}'s main in this JVM with a host folder as its argument; what it printed. */
    private List<String> runInThisJvm(String mainClass) throws Exception {
        Path hostDir = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : dir, "hicache-doc");
        PrintStream out = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try (URLClassLoader loader =
                new URLClassLoader(new URL[] {dir.toUri().toURL()}, getClass().getClassLoader())) {
            Method main = loader.loadClass(mainClass).getMethod("main", String[].class);
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
