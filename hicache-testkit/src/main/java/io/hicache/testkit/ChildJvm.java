package io.hicache.testkit;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM running a main class of this class path with this JVM's flags, whose standard output is collected line
 * by line, for tests that kill a process in the middle of its work. Only lines that ended in a newline count: a kill
 * in the middle of {@code "ok 5 9087"} leaves {@code "ok 5 90"}, which would name something else.
 *
 * <p>Thread-safe. The test that starts it kills it; {@link #kill()} waits for the process and its output.
 */
public final class ChildJvm {
    private final Process process;
    private final List<String> lines = new ArrayList<>();
    private final CompletableFuture<Void> reader;

    private ChildJvm(Process process) {
        this.process = process;
        // a thread of its own: on the common pool (one thread on 2 cores) a second child's output would wait for the
        // first child to end
        this.reader = new CompletableFuture<>();
        Thread.ofPlatform().name("child-jvm-output-" + process.pid()).daemon().start(() -> {
            try {
                collect();
            } finally {
                reader.complete(null);
            }
        });
    }

    /** Starts {@code mainClass} with {@code args}; its standard error goes to this JVM's. */
    public static ChildJvm start(Class<?> mainClass, List<String> args) throws IOException {
        List<String> command = command(mainClass);
        command.addAll(args);
        return new ChildJvm(new ProcessBuilder(command)
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start());
    }

    /** The command that runs {@code mainClass} in a JVM like this one (its java, flags and class path), without args. */
    public static List<String> command(Class<?> mainClass) {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElseThrow());
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-agentlib") && !a.startsWith("-javaagent"))
                .toList());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), mainClass.getName()));
        return command;
    }

    private void collect() {
        try (InputStream in = process.getInputStream()) {
            ByteArrayOutputStream line = new ByteArrayOutputStream();
            byte[] chunk = new byte[64 * 1024];
            int n;
            while ((n = in.read(chunk)) >= 0) {
                for (int i = 0; i < n; i++) {
                    if (chunk[i] == '\n') {
                        synchronized (lines) {
                            lines.add(line.toString(StandardCharsets.UTF_8));
                            lines.notifyAll();
                        }
                        line.reset();
                    } else {
                        line.write(chunk[i]);
                    }
                }
            }
        } catch (IOException e) {
            // the pipe closes when the child dies
        } finally {
            synchronized (lines) {
                lines.notifyAll();
            }
        }
    }

    /** Waits until the child printed a line starting with {@code prefix}; false if it died or time ran out first. */
    public boolean awaitLine(String prefix, long timeout, TimeUnit unit) throws InterruptedException {
        long end = System.nanoTime() + unit.toNanos(timeout);
        synchronized (lines) {
            while (true) {
                if (lines.stream().anyMatch(l -> l.startsWith(prefix))) {
                    return true;
                }
                long left = end - System.nanoTime();
                if (left <= 0 || (reader.isDone())) {
                    return false;
                }
                lines.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
    }

    /**
     * Kills the child with SIGKILL, waits for it and for the last of its output, and returns every whole line it
     * printed. The kill goes through the process handle: {@link Process#destroyForcibly()} would also close this end
     * of the child's output, dropping the lines it printed last.
     */
    public List<String> kill() throws Exception {
        process.toHandle().destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
        reader.get(30, TimeUnit.SECONDS);
        return lines();
    }

    /**
     * Asks the child to stop with SIGTERM (its shutdown hooks run), waits up to {@code timeout} for it and for the last
     * of its output, and returns its exit status; kills it and throws if it did not stop in time.
     */
    public int terminate(Duration timeout) throws Exception {
        process.toHandle().destroy();
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            kill();
            throw new IllegalStateException("the child did not stop within " + timeout + " of SIGTERM");
        }
        reader.get(30, TimeUnit.SECONDS);
        return process.exitValue();
    }

    /** The child's process id. */
    public long pid() {
        return process.pid();
    }

    /**
     * Sends the child {@code signal} ({@code STOP}, {@code CONT}...) with {@code kill}: for tests of a process that
     * stops answering without dying.
     */
    public void signal(String signal) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid()))
                .inheritIO()
                .start();
        if (kill.waitFor() != 0) {
            throw new IOException("kill -" + signal + " " + process.pid() + " failed");
        }
    }

    /** Whether the child still runs. */
    public boolean alive() {
        return process.isAlive();
    }

    /** Writes {@code line} and a newline to the child's standard input, for children that take commands. */
    public void tell(String line) throws IOException {
        process.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
        process.getOutputStream().flush();
    }

    /** The whole lines printed so far. */
    public List<String> lines() {
        synchronized (lines) {
            return List.copyOf(lines);
        }
    }
}
