package io.hicache.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Assumptions;

/**
 * A real etcd for tests: Debian's {@code etcd} binary on 127.0.0.1, ports found free, data in a temporary folder that
 * {@link #close()} deletes. Tests skip themselves (an assumption) where the binary is absent; {@code .ci/run} installs
 * it. {@link #stop()} and {@link #restart()} keep the data, for tests of an etcd outage.
 */
public final class EtcdProcess implements AutoCloseable {
    private static final Path BINARY = Path.of("/usr/bin/etcd");

    private final Path dir;
    private final int clientPort;
    private final int peerPort;
    private @Nullable Process process;

    private EtcdProcess(Path dir, int clientPort, int peerPort) {
        this.dir = dir;
        this.clientPort = clientPort;
        this.peerPort = peerPort;
    }

    /** Starts one; skips the test where etcd is not installed. */
    public static EtcdProcess start() {
        Assumptions.assumeTrue(Files.isExecutable(BINARY), "etcd is not installed (apt-get install etcd-server)");
        try {
            Path dir = Files.createTempDirectory("hicache-etcd-");
            EtcdProcess e = new EtcdProcess(dir, freePort(), freePort());
            e.launch();
            return e;
        } catch (IOException x) {
            throw new UncheckedIOException(x);
        }
    }

    private void launch() throws IOException {
        String client = "http://127.0.0.1:" + clientPort;
        String peer = "http://127.0.0.1:" + peerPort;
        Process started = new ProcessBuilder(
                        BINARY.toString(),
                        "--name",
                        "test",
                        "--data-dir",
                        dir.resolve("data").toString(),
                        "--listen-client-urls",
                        client,
                        "--advertise-client-urls",
                        client,
                        "--listen-peer-urls",
                        peer,
                        "--initial-advertise-peer-urls",
                        peer,
                        "--initial-cluster",
                        "test=" + peer)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("etcd.log").toFile())
                .start();
        process = started;
        long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (System.nanoTime() < end) {
            if (!started.isAlive()) {
                throw new IOException("etcd exited: " + Files.readString(dir.resolve("etcd.log")));
            }
            if (listens()) {
                return;
            }
            sleep(50);
        }
        throw new IOException("etcd did not listen within 20 s");
    }

    private boolean listens() {
        try (java.net.Socket probe = new java.net.Socket("127.0.0.1", clientPort)) {
            return probe.isConnected();
        } catch (IOException notYet) {
            return false;
        }
    }

    /** Its client endpoint. */
    public URI endpoint() {
        return URI.create("http://127.0.0.1:" + clientPort);
    }

    /** Its client endpoint as a list, for a cluster configuration. */
    public List<URI> endpoints() {
        return List.of(endpoint());
    }

    /** Kills it (its data stays). */
    public void stop() {
        Process p = process;
        if (p == null) {
            return;
        }
        p.destroyForcibly();
        try {
            p.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Starts it again on the same ports and data. */
    public void restart() {
        try {
            launch();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        stop();
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
