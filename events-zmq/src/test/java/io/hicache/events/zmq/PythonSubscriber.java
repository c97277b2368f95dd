package io.hicache.events.zmq;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * clients/python/interop/kv_events_subscriber.py as a child process of /usr/bin/python3: started, told when to stop,
 * and its report read line by line. Not thread-safe; the test closes it (which kills a process still running).
 */
final class PythonSubscriber implements AutoCloseable {
    static final Path PYTHON = Path.of("/usr/bin/python3");
    static final Path SCRIPT = Path.of("..", "clients", "python", "interop", "kv_events_subscriber.py");

    private final Process process;
    private final Writer stdin;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final Path stderr;
    private final Thread reader;

    private PythonSubscriber(Process process, Path stderr) {
        this.process = process;
        this.stderr = stderr;
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        this.reader = Thread.ofPlatform().daemon().name("python-subscriber-out").start(() -> {
            try (BufferedReader r =
                    new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    lines.add(line);
                }
            } catch (IOException e) {
                lines.add("READ-FAILED " + e);
            }
        });
    }

    /** True when /usr/bin/python3 can import zmq and msgpack (Debian's python3-zmq and python3-msgpack). */
    static boolean available() {
        if (!Files.isExecutable(PYTHON)) {
            return false;
        }
        try {
            Process p = new ProcessBuilder(PYTHON.toString(), "-c", "import zmq, msgpack")
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .start();
            return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Starts a subscriber and waits until it says READY (after its replay from 0, when {@code late}). */
    static PythonSubscriber start(String endpoint, String replay, String topic, boolean late, Path workDir)
            throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(
                PYTHON.toString(), SCRIPT.toString(), "--endpoint", endpoint, "--replay", replay, "--topic", topic));
        if (late) {
            command.add("--late");
        }
        Path err = Files.createTempFile(workDir, "subscriber-", ".err");
        PythonSubscriber s = new PythonSubscriber(
                new ProcessBuilder(command).redirectError(err.toFile()).start(), err);
        String first = s.lines.poll(30, TimeUnit.SECONDS);
        if (!"READY".equals(first)) {
            s.close();
            throw new AssertionError("the subscriber did not get ready: " + first + "; stderr: " + s.stderr());
        }
        return s;
    }

    /**
     * Tells it to stop once it has applied every batch up to {@code lastSeq}, and returns its report (the lines after
     * READY, up to DONE).
     */
    List<String> stopAfter(long lastSeq) throws IOException, InterruptedException {
        stdin.write("STOP " + lastSeq + "\n");
        stdin.flush();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            throw new AssertionError("the subscriber did not finish within 60 s; stderr: " + stderr());
        }
        reader.join(10_000);
        List<String> out = new ArrayList<>(lines);
        if (process.exitValue() != 0 || out.isEmpty() || !out.getLast().startsWith("DONE")) {
            throw new AssertionError(
                    "the subscriber failed (exit " + process.exitValue() + "): " + out + "; stderr: " + stderr());
        }
        return out;
    }

    private String stderr() {
        try {
            return Files.readString(stderr);
        } catch (IOException e) {
            return "(unreadable: " + e + ")";
        }
    }

    @Override
    public void close() {
        process.destroyForcibly();
        try {
            Files.deleteIfExists(stderr);
        } catch (IOException ignored) {
            // a temp file left behind
        }
    }
}
