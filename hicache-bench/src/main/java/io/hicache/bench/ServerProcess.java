package io.hicache.bench;

import io.hicache.core.util.Threads;
import io.hicache.storage.remote.protocol.Wire;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * A server under test in a process of its own, on 127.0.0.1: the HiCache daemon in a child JVM, Redis or memcached. Stopping
 * sends SIGTERM, waits, and removes the process's scratch folder. Not thread-safe.
 */
public final class ServerProcess implements AutoCloseable {
    public final String name;
    public final String version;
    public final int port;
    /** The daemon's Redis protocol port ({@code --server.resp-port} among the flags), else -1. */
    public int respPort = -1;
    /** The daemon's start line (what it chose: transport, TLS, ...); empty for other servers. */
    private String startLine = "";
    /** The daemon's metrics endpoint's port (Prometheus text at {@code /metrics}), or -1 when off or not the daemon. */
    public final int metricsPort;

    /** CPU time the server process has used so far, all its threads, or -1 where the platform does not say. */
    public long cpuNanos() {
        return process.toHandle()
                .info()
                .totalCpuDuration()
                .map(d -> d.toNanos())
                .orElse(-1L);
    }

    private final Process process;
    private final Path scratch;

    private ServerProcess(String name, String version, int port, Process process, Path scratch) {
        this(name, version, port, -1, process, scratch);
    }

    private ServerProcess(String name, String version, int port, int metricsPort, Process process, Path scratch) {
        this.name = name;
        this.version = version;
        this.port = port;
        this.metricsPort = metricsPort;
        this.process = process;
        this.scratch = scratch;
    }

    /**
     * The daemon with the in-memory setup Redis is compared in: the host slab in {@code /dev/shm}, no L3 store
     * (Redis runs with persistence off), and the launcher's JVM and flags.
     */
    public static ServerProcess hicache(long slabBytes) throws IOException, InterruptedException {
        return hicache(slabBytes, List.of());
    }

    /**
     * As {@link #hicache(long)}, with {@code flags} added to the launcher's ({@code --server.transport nio}). Metrics
     * are off unless {@code flags} set {@code --server.metrics-port} (0: a free port, then in {@link #metricsPort}).
     */
    public static ServerProcess hicache(long slabBytes, List<String> flags) throws IOException, InterruptedException {
        Path scratch = Files.createTempDirectory(
                Files.isDirectory(Path.of("/dev/shm"))
                        ? Path.of("/dev/shm")
                        : Path.of(System.getProperty("java.io.tmpdir")),
                "hicache-bench-daemon-");
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElseThrow());
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-Xmx") && !a.startsWith("-agentlib"))
                .toList());
        command.addAll(List.of(
                "-cp",
                System.getProperty("java.class.path"),
                "io.hicache.cli.HiCacheCli",
                "serve",
                "--server.port",
                "0",
                "--server.store",
                "none",
                "--server.host-dir",
                scratch.toString(),
                "--server.host-size",
                slabBytes + "B"));
        if (!flags.contains("--server.metrics-port")) {
            command.addAll(List.of("--server.metrics-port", "-1"));
        }
        command.addAll(flags);
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String start = awaitLine(p, scratch, line -> line.contains("HiCache daemon on 127.0.0.1:"));
        int port = portAfter(start, "HiCache daemon on 127.0.0.1:");
        int metricsPort = start.contains("metrics: http://") ? portAfter(start, "metrics: http://127.0.0.1:") : -1;
        ServerProcess daemon = new ServerProcess("hicache", Wire.VERSION + "", port, metricsPort, p, scratch);
        daemon.respPort = start.contains("Redis protocol on port ") ? portAfter(start, "Redis protocol on port ") : -1;
        daemon.startLine = start;
        return daemon;
    }

    /** The daemon's start line; empty for servers that are not a HiCache daemon. */
    public String startLine() {
        return startLine;
    }

    private static int portAfter(String line, String marker) {
        return Integer.parseInt(
                line.substring(line.indexOf(marker) + marker.length()).split("\\D", 2)[0]);
    }

    /** {@code redis-server} with persistence off, found on this machine or installed with apt-get. */
    public static ServerProcess redis() throws IOException, InterruptedException {
        Path binary = RedisInstall.find();
        String version = RedisInstall.version(binary);
        Path scratch = Files.createTempDirectory("hicache-bench-redis-");
        int port = freePort();
        Process p = new ProcessBuilder(
                        binary.toString(),
                        "--bind",
                        "127.0.0.1",
                        "--port",
                        Integer.toString(port),
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        scratch.toString(),
                        "--daemonize",
                        "no",
                        "--protected-mode",
                        "yes",
                        "--loglevel",
                        "warning")
                .redirectErrorStream(true)
                .start();
        awaitPort(p, "redis-server", port);
        return new ServerProcess("redis", version, port, p, scratch);
    }

    /**
     * {@code memcached} (Debian's, installed with apt-get when missing) on 127.0.0.1 over TCP only (no UDP), with
     * {@code threads} worker threads, {@code memoryMiB} of item memory and items up to {@code maxItemBytes}.
     */
    public static ServerProcess memcached(int threads, long memoryMiB, long maxItemBytes)
            throws IOException, InterruptedException {
        Path binary = DebianTools.find("memcached", "memcached");
        Process v = new ProcessBuilder(binary.toString(), "-V")
                .redirectErrorStream(true)
                .start();
        String version = new String(v.getInputStream().readAllBytes(), StandardCharsets.UTF_8)
                .strip()
                .replaceFirst("^memcached\\s+", "");
        v.waitFor(10, TimeUnit.SECONDS);
        Path scratch = Files.createTempDirectory("hicache-bench-memcached-");
        int port = freePort();
        List<String> command = new ArrayList<>(List.of(
                binary.toString(),
                "-l",
                "127.0.0.1",
                "-p",
                Integer.toString(port),
                "-U",
                "0",
                "-t",
                Integer.toString(threads),
                "-m",
                Long.toString(memoryMiB),
                "-I",
                (maxItemBytes >> 10) + "k",
                "-c",
                "1024"));
        if ("root".equals(System.getProperty("user.name"))) {
            command.addAll(List.of("-u", "root")); // memcached refuses to run as root unless told which user to be
        }
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        awaitPort(p, "memcached", port);
        return new ServerProcess("memcached", version, port, p, scratch);
    }

    /** Drains the child's output and waits until it accepts connections on {@code port}. */
    private static void awaitPort(Process p, String name, int port) throws IOException, InterruptedException {
        drain(p);
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 200);
                return;
            } catch (IOException notYet) {
                if (!p.isAlive() || System.nanoTime() > until) {
                    p.destroyForcibly();
                    throw new IOException(name + " did not start on port " + port + ": " + notYet);
                }
                Thread.sleep(20);
            }
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return s.getLocalPort();
        }
    }

    /** Reads the child's output until a line {@code wanted} accepts, returned; the rest is drained. */
    private static String awaitLine(Process p, Path scratch, Predicate<String> wanted) throws IOException {
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        String line;
        while ((line = out.readLine()) != null) {
            seen.append(line).append('\n');
            if (wanted.test(line)) {
                drain(out);
                return line;
            }
        }
        p.destroyForcibly();
        deleteTree(scratch);
        throw new IOException("the daemon exited before it served:\n" + seen);
    }

    private static void drain(Process p) {
        drain(new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)));
    }

    /** Keeps reading a child's output so that it never blocks on a full pipe; lines go to this process's stderr. */
    private static void drain(BufferedReader out) {
        Threads.start("bench-server-output", () -> {
            try {
                String line;
                while ((line = out.readLine()) != null) {
                    System.err.println("  | " + line);
                }
            } catch (IOException ignored) {
                // the child is gone
            }
        });
    }

    /** Kills the process with SIGKILL and waits for it (its scratch folder goes at {@link #close()}). */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws IOException {
        process.destroy();
        try {
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        deleteTree(scratch);
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
